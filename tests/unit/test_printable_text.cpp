// Text echoed in error messages: escaped and bounded (core/printable.hpp), and the error paths
// that apply it (a NUL inside a UserError's message no longer ends it).
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <string>

#include "core/error.hpp"
#include "core/printable.hpp"

using trident::printable;
using trident::printable_message;

BOOST_AUTO_TEST_SUITE(printable_text)

BOOST_AUTO_TEST_CASE(control_characters_and_invalid_utf8_are_escaped) {
  BOOST_TEST(printable(std::string("a\0b", 3)) == "a\\x00b");
  BOOST_TEST(printable("tab\there\nnew\rline\x7f") == "tab\\there\\nnew\\rline\\x7f");
  BOOST_TEST(printable("\x1b[31mred") == "\\x1b[31mred");
  BOOST_TEST(printable("bad \xff\xfe bytes") == "bad \\xff\\xfe bytes");
  BOOST_TEST(printable("\xC0\xAF") == "\\xc0\\xaf");  // an overlong '/'
  BOOST_TEST(printable("caf\xC3\xA9 \xE2\x98\x83") == "caf\xC3\xA9 \xE2\x98\x83");  // UTF-8 stays
}

BOOST_AUTO_TEST_CASE(invisible_characters_are_shown) {
  BOOST_TEST(printable("\xEF\xBB\xBF[model]") == "\\ufeff[model]");  // a byte-order mark
  BOOST_TEST(printable("a\xE2\x80\x8B" "b") == "a\\u200bb");          // a zero-width space
  BOOST_TEST(printable("x\xE2\x80\xAEy") == "x\\u202ey");             // right-to-left override
}

BOOST_AUTO_TEST_CASE(long_text_is_cut_with_its_length) {
  const std::string cut = printable(std::string(1000000, 'x'), 20);
  BOOST_TEST(cut == std::string(20, 'x') + "\xE2\x80\xA6 (1000000 bytes)");
  // Never inside a UTF-8 character.
  const std::string snowmen = printable(std::string(30, 'a') + "\xE2\x98\x83\xE2\x98\x83", 31);
  BOOST_TEST(snowmen.substr(0, 33) == std::string(30, 'a') + "\xE2\x98\x83");
  BOOST_TEST(printable("short", 20) == "short");
}

BOOST_AUTO_TEST_CASE(messages_keep_line_breaks_and_survive_nul) {
  BOOST_TEST(printable_message("usage:\n  trident\x01") == "usage:\n  trident\\x01");
  const trident::UserError error("value '" + std::string("a\0b", 3) + "' is wrong; fix it");
  BOOST_TEST(std::string(error.what()) == "value 'a\\x00b' is wrong; fix it");
  BOOST_TEST(trident::invalid_utf8_at("ok \xE2\x98\x83 then \xFF") == 12u);
  BOOST_TEST(trident::invalid_utf8_at("all good") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
