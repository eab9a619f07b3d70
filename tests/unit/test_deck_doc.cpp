// docs/DECK.md documents every key exactly as the schema defines it (run from the repo root).
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "deck/doc.hpp"
#include "deck/schema.hpp"

BOOST_AUTO_TEST_SUITE(deck_doc)

BOOST_AUTO_TEST_CASE(deck_md_key_tables_equal_the_schema) {
  std::ifstream in("docs/DECK.md");
  BOOST_REQUIRE_MESSAGE(in, "docs/DECK.md not found: run the unit tests from the repository root");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string doc = buffer.str();
  const auto begin = doc.find(trident::deck::kDocBegin);
  const auto end = doc.find(trident::deck::kDocEnd);
  BOOST_REQUIRE(begin != std::string::npos);
  BOOST_REQUIRE(end != std::string::npos);
  const auto body_start = begin + std::string(trident::deck::kDocBegin).size() + 1;
  const std::string documented = doc.substr(body_start, end - body_start);
  std::string generated = trident::deck::markdown_reference();
  while (!generated.empty() && generated.back() == '\n') generated.pop_back();
  BOOST_TEST(documented == generated + "\n",
             "docs/DECK.md is out of date with src/deck/schema.cpp: run `make docs`");
  for (const auto& spec : trident::deck::schema())
    BOOST_TEST(documented.find("| `" + spec.name() + "` |") != std::string::npos, spec.key);
}

BOOST_AUTO_TEST_SUITE_END()
