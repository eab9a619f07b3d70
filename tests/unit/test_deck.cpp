// Deck parsing: values, overrides, the resolved deck, and one test per kind of deck error.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <string>

#include "core/error.hpp"
#include "deck/deck.hpp"
#include "deck/value.hpp"

using trident::UserError;
using trident::deck::Deck;
using trident::deck::Interval;
using trident::deck::Override;

namespace {

const std::string kModel =
    "[model]\nlayers = 4\nheads = 4\nhidden = 64\nvocab = 256\nseq_len = 32\n";

// The message of the UserError that parsing `text` raises ("" if none).
std::string parse_error(const std::string& text, const std::vector<Override>& overrides = {}) {
  try {
    Deck::parse("t.deck", text, overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(deck)

BOOST_AUTO_TEST_CASE(parses_values_defaults_and_origins) {
  const Deck deck = Deck::parse("t.deck", "# a comment\n" + kModel +
                                "[parallel]\ntensor = 2  # inline comment\nstage_layers = 1, 3\n"
                                "[comm]\noverlap = off\n[checkpoint]\nfull_interval = 5min\n",
                                {});
  BOOST_TEST(deck.get_int("model.layers") == 4);
  BOOST_TEST(deck.get_int("parallel.tensor") == 2);
  BOOST_TEST(deck.get_int("parallel.pipeline") == 1);  // default
  BOOST_TEST(deck.get_float("optim.lr") == 6e-4);
  BOOST_TEST(deck.get_bool("comm.overlap") == false);
  BOOST_TEST(deck.get_string("parallel.schedule") == "1f1b");
  BOOST_TEST((deck.get_int_list("parallel.stage_layers") == std::vector<int64_t>{1, 3}));
  BOOST_TEST((deck.get_interval("checkpoint.full_interval") ==
              Interval{Interval::Unit::Seconds, 300}));
  BOOST_TEST(deck.origin("parallel.tensor").describe() == "t.deck:9");
  BOOST_TEST(deck.origin("parallel.data").describe() == "t.deck (default)");
  BOOST_TEST(deck.cite("model.heads") == "model.heads = 4 (t.deck:4)");
}

BOOST_AUTO_TEST_CASE(command_line_overrides_win_and_are_checked) {
  const Deck deck = Deck::parse("t.deck", kModel + "[parallel]\ndata = 4\n",
                                {{"parallel.data", "2"}, {"optim.lr", "1e-3"}});
  BOOST_TEST(deck.get_int("parallel.data") == 2);
  BOOST_TEST(deck.get_float("optim.lr") == 1e-3);
  BOOST_TEST(deck.origin("parallel.data").describe() == "command line");
  const std::string twice = parse_error(kModel, {{"parallel.data", "2"}, {"parallel.data", "4"}});
  BOOST_TEST(contains(twice, "--parallel.data is given twice"));
  const std::string bad = parse_error(kModel, {{"parallel.data", "two"}});
  BOOST_TEST(contains(bad, "command line: parallel.data = 'two' is not an integer"));
}

BOOST_AUTO_TEST_CASE(resolved_deck_reads_back_to_the_same_values) {
  const Deck deck = Deck::parse("t.deck", kModel + "[optim]\nlr = 3e-4\n",
                                {{"parallel.schedule", "gpipe"}, {"comm.overlap", "no"}});
  const std::string ini = deck.to_ini("header line 1\nheader line 2");
  BOOST_TEST(contains(ini, "# header line 1\n# header line 2\n"));
  BOOST_TEST(contains(ini, "schedule = gpipe  # command line"));
  const Deck again = Deck::parse("resolved.ini", ini, {});
  // Same values in the same canonical form; only the origin notes differ (now all from the file).
  std::string without_origins = ini;
  for (size_t at; (at = without_origins.find("  # command line")) != std::string::npos;)
    without_origins.erase(at, std::string("  # command line").size());
  BOOST_TEST(again.to_ini("header line 1\nheader line 2") == without_origins);
  BOOST_TEST(again.get_float("optim.lr") == 3e-4);
  BOOST_TEST(again.get_bool("comm.overlap") == false);
}

BOOST_AUTO_TEST_CASE(error_unknown_section_suggests_the_nearest) {
  const std::string e = parse_error("[modle]\nlayers = 4\n");
  BOOST_TEST(contains(e, "t.deck:1: unknown section [modle]. Did you mean [model]?"), e);
}

BOOST_AUTO_TEST_CASE(error_unknown_key_suggests_the_nearest) {
  const std::string e = parse_error(kModel + "layrs = 3\n");
  BOOST_TEST(contains(e, "t.deck:7: unknown key 'model.layrs'. Did you mean 'model.layers'?"), e);
}

BOOST_AUTO_TEST_CASE(error_key_outside_any_section_names_its_section) {
  const std::string e = parse_error("tensor = 2\n" + kModel);
  BOOST_TEST(contains(e, "t.deck:1: key 'tensor' is outside any section. Did you mean "
                         "'parallel.tensor'"), e);
}

BOOST_AUTO_TEST_CASE(error_wrong_type) {
  const std::string e = parse_error(kModel + "[comm]\noverlap = maybe\n");
  BOOST_TEST(contains(e, "t.deck:8: comm.overlap = 'maybe' is not a boolean; allowed: true or false"), e);
  const std::string f = parse_error("[model]\nlayers = four\n");
  BOOST_TEST(contains(f, "t.deck:2: model.layers = 'four' is not an integer; allowed: an integer in [1, 1024]"), f);
}

BOOST_AUTO_TEST_CASE(error_out_of_range) {
  const std::string e = parse_error(kModel + "[parallel]\ntensor = 0\n");
  BOOST_TEST(contains(e, "t.deck:8: parallel.tensor = '0' is below the minimum; allowed: an integer in [1, 4096]"), e);
  const std::string f = parse_error(kModel + "[parallel]\nschedule = zigzag\n");
  BOOST_TEST(contains(f, "is not an allowed choice; allowed: one of 1f1b, gpipe"), f);
}

BOOST_AUTO_TEST_CASE(error_missing_required_key) {
  const std::string e = parse_error("[model]\nlayers = 4\nheads = 4\nvocab = 256\nseq_len = 8\n");
  BOOST_TEST(contains(e, "t.deck: missing required key model.hidden"), e);
  BOOST_TEST(contains(e, "--model.hidden=VALUE"), e);
}

BOOST_AUTO_TEST_CASE(error_key_given_twice) {
  const std::string e = parse_error(kModel + "heads = 8\n");
  BOOST_TEST(contains(e, "t.deck:7: model.heads is given twice (lines 3 and 7)"), e);
}

BOOST_AUTO_TEST_CASE(error_line_that_is_not_ini) {
  const std::string e = parse_error(kModel + "just some words\n");
  BOOST_TEST(contains(e, "t.deck:7: cannot read 'just some words'"), e);
  const std::string f = parse_error("[model\n");
  BOOST_TEST(contains(f, "t.deck:1: malformed section header"), f);
}

BOOST_AUTO_TEST_CASE(value_parsers) {
  using namespace trident::deck;
  BOOST_TEST((parse_interval("200steps") == Interval{Interval::Unit::Steps, 200}));
  BOOST_TEST((parse_interval("1h") == Interval{Interval::Unit::Seconds, 3600}));
  BOOST_TEST((parse_interval("30s") == Interval{Interval::Unit::Seconds, 30}));
  BOOST_TEST((parse_interval("off") == Interval{}));
  BOOST_CHECK_THROW(parse_interval("5 parsecs"), std::invalid_argument);
  BOOST_CHECK_THROW(parse_interval("1.5steps"), std::invalid_argument);
  BOOST_TEST(parse_bool("yes") == true);
  BOOST_CHECK_THROW(parse_int("3.0"), std::invalid_argument);
  BOOST_CHECK_THROW(parse_int("99999999999999999999"), std::invalid_argument);
  BOOST_CHECK_THROW(parse_float("nan"), std::invalid_argument);
  BOOST_CHECK_THROW(parse_int_list("1,,2"), std::invalid_argument);
  const KeySpec* lr = find_key("optim.lr");
  BOOST_TEST(canonical_value(*lr, "6e-4") == "0.0006");
  BOOST_TEST(canonical_value(*find_key("comm.overlap"), "on") == "true");
}

BOOST_AUTO_TEST_CASE(suggestions) {
  using trident::deck::suggest_key;
  BOOST_TEST(contains(suggest_key("parallel.tensr"), "parallel.tensor"));
  BOOST_TEST(contains(suggest_key("seqlen"), "model.seq_len"));
  BOOST_TEST(suggest_key("completely.unrelated_name_here") == "");
}

// Issue 20: a byte-order mark is skipped; binary is reported as such, at its line and column,
// without the NUL cutting the message short; values echoed in messages are bounded and escaped.
BOOST_AUTO_TEST_CASE(byte_order_mark_is_skipped) {
  const Deck deck = Deck::parse("t.deck", "\xEF\xBB\xBF" + kModel, {});
  BOOST_TEST(deck.get_int("model.layers") == 4);
  BOOST_TEST(deck.origin("model.layers").line == 2);
}

BOOST_AUTO_TEST_CASE(nul_and_control_bytes_are_binary) {
  const std::string nul = parse_error(kModel + "[optim]\nlr = 0.1" + std::string(1, '\0') + "x\n");
  BOOST_TEST(contains(nul, "t.deck:8 (column 9): byte 0x00 (NUL): the deck is binary, not INI text"), nul);
  BOOST_TEST(contains(nul, "give a text deck"), nul);  // what follows the NUL is there too
  const std::string escape = parse_error(kModel + "\x1b[31m");
  BOOST_TEST(contains(escape, "t.deck:7 (column 1): byte 0x1b (a control character)"), escape);
  const std::string latin1 = parse_error(kModel + "# caf\xE9\n");
  BOOST_TEST(contains(latin1, "t.deck:7 (column 6): the deck is not UTF-8 text (byte \\xe9)"), latin1);
  BOOST_TEST(parse_error(kModel + "# café ☃\n").empty());
}

BOOST_AUTO_TEST_CASE(echoed_values_are_bounded_and_printable) {
  const std::string huge = parse_error(kModel + "[optim]\nlr = " + std::string(1000000, 'x') + "\n");
  BOOST_TEST(huge.size() < 400u, huge.size());
  BOOST_TEST(contains(huge, "(1000000 bytes)' is not a finite number"), huge);
  const std::string escaped = parse_error(kModel, {{"train.steps", "a\x1b[2Jb"}});
  BOOST_TEST(contains(escaped, "train.steps = 'a\\x1b[2Jb' is not an integer"), escaped);
}

BOOST_AUTO_TEST_SUITE_END()
