// Cross-key validation: the layout against the job, divisibility, batch arithmetic.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "deck/validate.hpp"

using trident::UserError;
using trident::deck::Deck;

namespace {

Deck make(std::vector<trident::deck::Override> overrides) {
  return Deck::parse("v.deck",
                     "[model]\nlayers = 4\nheads = 4\nhidden = 64\nvocab = 256\nseq_len = 32\n"
                     "[train]\nglobal_batch = 8\nmicro_batch = 1\n",
                     overrides);
}

std::string problem(std::vector<trident::deck::Override> overrides, int world) {
  try {
    trident::deck::validate_layout(make(overrides), world);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(validate)

BOOST_AUTO_TEST_CASE(valid_layouts_pass) {
  BOOST_TEST(problem({}, 1) == "");
  BOOST_TEST(problem({{"parallel.tensor", "2"}, {"parallel.pipeline", "2"}, {"parallel.data", "2"}}, 8) == "");
  BOOST_TEST(problem({{"parallel.pipeline", "2"}, {"parallel.stage_layers", "1,3"}}, 2) == "");
  BOOST_TEST(trident::deck::micro_batches_per_step(make({{"parallel.data", "2"}})) == 4);
}

BOOST_AUTO_TEST_CASE(product_must_equal_the_number_of_ranks) {
  const std::string e = problem({{"parallel.tensor", "2"}}, 4);
  BOOST_TEST(contains(e, "2 x 1 x 1 = 2, but the job has 4 ranks"), e);
  BOOST_TEST(contains(e, "--parallel.data=2"), e);
  BOOST_TEST(contains(e, "parallel.tensor = 2 (command line)"), e);
}

BOOST_AUTO_TEST_CASE(heads_must_divide_by_tensor) {
  const std::string e = problem({{"parallel.tensor", "3"}, {"model.heads", "4"}}, 3);
  BOOST_TEST(contains(e, "model.heads must be divisible by parallel.tensor"), e);
}

BOOST_AUTO_TEST_CASE(hidden_must_divide_by_heads) {
  const std::string e = problem({{"model.hidden", "66"}}, 1);
  BOOST_TEST(contains(e, "model.hidden must be divisible by model.heads"), e);
}

BOOST_AUTO_TEST_CASE(layers_at_least_pipeline_stages) {
  const std::string e = problem({{"parallel.pipeline", "8"}, {"train.global_batch", "8"}}, 8);
  BOOST_TEST(contains(e, "model.layers must be at least parallel.pipeline"), e);
}

BOOST_AUTO_TEST_CASE(global_batch_divisible_by_micro_batch_times_data) {
  const std::string e = problem({{"parallel.data", "2"}, {"train.micro_batch", "3"}}, 2);
  BOOST_TEST(contains(e, "train.global_batch must be divisible by train.micro_batch x parallel.data = 6"), e);
}

BOOST_AUTO_TEST_CASE(one_f_one_b_needs_a_micro_batch_per_stage) {
  const std::string e = problem({{"parallel.pipeline", "4"}, {"train.global_batch", "2"}}, 4);
  BOOST_TEST(contains(e, "1F1B schedule needs at least as many micro-batches"), e);
  BOOST_TEST(problem({{"parallel.pipeline", "4"}, {"train.global_batch", "2"},
                      {"parallel.schedule", "gpipe"}}, 4) == "");
}

BOOST_AUTO_TEST_CASE(stage_layers_must_match_stages_and_layers) {
  BOOST_TEST(contains(problem({{"parallel.pipeline", "2"}, {"parallel.stage_layers", "4"}}, 2),
                      "has 1 entries but there are 2 pipeline stages"));
  BOOST_TEST(contains(problem({{"parallel.pipeline", "2"}, {"parallel.stage_layers", "2,3"}}, 2),
                      "sums to 5 but the model has 4 blocks"));
}

BOOST_AUTO_TEST_CASE(topology_settings_must_fit) {
  BOOST_TEST(contains(problem({{"parallel.data", "4"}, {"topology.ranks_per_node", "3"}}, 4),
                      "topology.ranks_per_node must divide the number of ranks 4"));
  BOOST_TEST(contains(problem({{"topology.nodes_per_rack", "2"}, {"topology.file", "t.conf"}}, 1),
                      "set only one of them"));
}

BOOST_AUTO_TEST_CASE(slowdown_pairs_are_parsed_and_checked) {
  using trident::deck::parse_slowdown;
  BOOST_TEST(parse_slowdown("").empty());
  const auto pairs = parse_slowdown("1:2,3:1.5");
  BOOST_TEST(pairs.size() == 2u);
  BOOST_TEST(pairs[1].first == 3);
  BOOST_TEST(pairs[1].second == 1.5);
  for (const char* bad : {"1", "1:", ":2", "a:2", "1:2x", "-1:2", "1:0.5", "1:2,1:3", "1:2,"})
    BOOST_CHECK_THROW(parse_slowdown(bad), std::invalid_argument);
  BOOST_TEST(problem({{"parallel.data", "2"}, {"debug.slowdown", "1:2"}}, 2).empty());
  BOOST_TEST(contains(problem({{"parallel.data", "2"}, {"debug.slowdown", "2:2"}}, 2), "names rank 2"));
  BOOST_TEST(contains(problem({{"parallel.data", "2"}, {"debug.slowdown", "1:0.9"}}, 2), "at least 1"));
}

BOOST_AUTO_TEST_SUITE_END()
