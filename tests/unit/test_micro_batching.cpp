// The micro-batch count rules (pipeline/micro_batching.hpp): the counts that divide a batch, the
// seed's §4.1 rule as written, the fitted per-micro-batch cost, and the model's choice against
// an exhaustive evaluation of the step formula.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <vector>

#include "pipeline/micro_batching.hpp"

using namespace trident::pipeline;

namespace {

// Figures of `stages` whose forward + backward per micro-batch are `ms` (backward twice forward).
BalanceFigures stages_taking(const std::vector<double>& ms) {
  BalanceFigures f;
  for (double t : ms) {
    f.stage_forward_ms.push_back(t / 3), f.stage_backward_ms.push_back(2 * t / 3), f.stage_edge_ms.push_back(0);
  }
  f.replica_forward_ms = {1}, f.replica_backward_ms = {2};
  return f;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(micro_batching)

BOOST_AUTO_TEST_CASE(micro_batch_counts_divide_the_sequences) {
  BOOST_TEST(micro_batch_counts(12) == std::vector<int>({1, 2, 3, 4, 6, 12}), boost::test_tools::per_element());
  BOOST_TEST(micro_batch_counts(7) == std::vector<int>({1, 7}), boost::test_tools::per_element());
  BOOST_TEST(micro_batch_counts(1) == std::vector<int>({1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(seed_rule_is_ceil_of_max_over_median) {
  // Two stages, one twice as slow: median = the mean 1.5, max/median 1.33 -> 2.
  BOOST_TEST(seed_micro_batches(stages_taking({1, 2})) == 2);
  // Four stages, one at 3x: median 1, max/median 3 -> 3.
  BOOST_TEST(seed_micro_batches(stages_taking({1, 1, 1, 3})) == 3);
  // Balanced: 1.
  BOOST_TEST(seed_micro_batches(stages_taking({2, 2, 2})) == 1);
}

BOOST_AUTO_TEST_CASE(seed_count_rounds_up_to_a_divisor_and_waits_for_imbalance) {
  const std::vector<int> allowed{1, 2, 4, 8};
  // max/median 3 -> N = 3, not a divisor of 8: 4.
  Decision d = decide_seed_count(stages_taking({1, 1, 1, 3}), 8, allowed, 1.15);
  BOOST_TEST(d.move);
  BOOST_TEST(d.counts[0] == 4);
  BOOST_TEST(d.why.find("N = 3") != std::string::npos);
  // Within the threshold: no change, whatever the rule would say.
  d = decide_seed_count(stages_taking({1, 1.1}), 8, allowed, 1.15);
  BOOST_TEST(!d.move);
  BOOST_TEST(d.counts[0] == 8);
  // Already at the seed's count: no change.
  d = decide_seed_count(stages_taking({1, 2}), 2, allowed, 1.15);
  BOOST_TEST(!d.move);
}

BOOST_AUTO_TEST_CASE(cost_fit_recovers_a_line_and_clamps) {
  MicroBatchCost cost;
  cost.observe(1, 0.5 + 2.0);
  BOOST_TEST(!cost.fitted());
  cost.observe(4, 0.5 + 8.0);
  cost.observe(2, 0.5 + 4.0);
  BOOST_TEST(cost.fitted());
  BOOST_TEST(cost.alpha() == 0.5, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(cost.beta() == 2.0, boost::test_tools::tolerance(1e-12));
  // The newest measurement of a size replaces the older one.
  cost.observe(4, 0.5 + 8.0);
  BOOST_TEST(cost.points().size() == 3u);
  // A line falling with b (noise): no per-sequence cost, the mean as the fixed cost.
  MicroBatchCost falling;
  falling.observe(1, 3.0), falling.observe(2, 2.0);
  BOOST_TEST(falling.beta() == 0.0);
  BOOST_TEST(falling.alpha() == 2.5, boost::test_tools::tolerance(1e-12));
  // A line with a negative intercept: through the origin instead.
  MicroBatchCost steep;
  steep.observe(1, 1.0), steep.observe(2, 3.0);
  BOOST_TEST(steep.alpha() == 0.0);
  BOOST_TEST(steep.beta() == 7.0 / 5.0, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(model_count_minimises_the_step_formula) {
  // t(b) = alpha + beta b over 16 sequences and 4 stages: the allowed count of least
  // (m + p - 1) t(16/m), checked against every count.
  for (double alpha : {0.0, 0.1, 1.0, 5.0}) {
    MicroBatchCost cost;
    cost.observe(1, alpha + 1.0), cost.observe(16, alpha + 16.0);
    const std::vector<int> allowed = micro_batch_counts(16);
    const Decision d = decide_model_count(cost, 4, 4, 16, allowed, 0.0);
    int best = 4;
    for (int m : allowed)
      if (predicted_pipeline_ms(cost, m, 4, 16) < predicted_pipeline_ms(cost, best, 4, 16)) best = m;
    BOOST_TEST(d.counts[0] == best);
    BOOST_TEST(d.predicted_ms == predicted_pipeline_ms(cost, best, 4, 16));
  }
  // No fixed cost: the most micro-batches (the smallest bubble).
  MicroBatchCost free;
  free.observe(1, 1.0), free.observe(2, 2.0);
  BOOST_TEST(decide_model_count(free, 4, 4, 16, micro_batch_counts(16), 0.0).counts[0] == 16);
  // Memory allows only up to 4 sequences a micro-batch: counts 4, 8, 16 remain.
  MicroBatchCost fixed_heavy;
  fixed_heavy.observe(1, 10.0), fixed_heavy.observe(16, 10.1);
  BOOST_TEST(decide_model_count(fixed_heavy, 8, 1, 16, {4, 8, 16}, 0.0).counts[0] == 4);
}

BOOST_AUTO_TEST_CASE(model_count_respects_the_margin) {
  MicroBatchCost cost;
  cost.observe(1, 1.05), cost.observe(2, 2.05);  // alpha 0.05, beta 1
  // 16 sequences, 2 stages: 8 -> 16 predicts (17 x 1.05) against (9 x 2.05): 17.85 vs 18.45, 3%.
  const Decision small = decide_model_count(cost, 8, 2, 16, micro_batch_counts(16), 0.1);
  BOOST_TEST(!small.move);
  BOOST_TEST(small.counts[0] == 8);
  const Decision taken = decide_model_count(cost, 8, 2, 16, micro_batch_counts(16), 0.01);
  BOOST_TEST(taken.move);
  BOOST_TEST(taken.counts[0] == 16);
}

BOOST_AUTO_TEST_CASE(model_count_weighs_an_interleaved_bubble_by_its_chunks) {
  // The same costs with v = 2 chunks a stage: the bubble is half as many micro-batch times, so
  // 8 -> 16 predicts (16.5 x 1.05) against (8.5 x 2.05): 17.325 vs 17.425, 0.6%: no move at 1%.
  MicroBatchCost cost;
  cost.observe(1, 1.05), cost.observe(2, 2.05);
  BOOST_TEST(predicted_pipeline_ms(cost, 8, 2, 16, 2) == 8.5 * cost.per_micro_batch_ms(2));
  const Decision interleaved = decide_model_count(cost, 8, 2, 16, {2, 4, 8, 16}, 0.01, 2);
  BOOST_TEST(!interleaved.move);
  BOOST_TEST(interleaved.why.find("bubble 6% -> 3%") != std::string::npos, interleaved.why);
  BOOST_TEST(decide_model_count(cost, 8, 2, 16, {2, 4, 8, 16}, 0.001, 2).counts[0] == 16);
}

BOOST_AUTO_TEST_CASE(model_count_stays_within_one_size_of_the_measured) {
  // Measured at sizes 4 and 8 with no fixed cost: the line says size 1 (16 x 1) is best, but
  // only one size beyond the measured ones is a candidate: size 2 (8 x 2).
  MicroBatchCost cost;
  cost.observe(4, 4.0), cost.observe(8, 8.0);
  const Decision d = decide_model_count(cost, 2, 2, 16, micro_batch_counts(16), 0.0);
  BOOST_TEST(d.counts[0] == 8);
  // Once size 2 is measured too, size 1 is within reach.
  cost.observe(2, 2.0);
  BOOST_TEST(decide_model_count(cost, 8, 2, 16, micro_batch_counts(16), 0.0).counts[0] == 16);
  // Upwards the same: measured at 1 and 2 with a large fixed cost and one stage, size 4 (4 x 4)
  // and not 16.
  MicroBatchCost fixed;
  fixed.observe(1, 10.0), fixed.observe(2, 10.1);
  BOOST_TEST(decide_model_count(fixed, 16, 1, 16, micro_batch_counts(16), 0.0).counts[0] == 4);
}

BOOST_AUTO_TEST_CASE(probe_goes_towards_a_smaller_bubble_with_stages) {
  BOOST_TEST(probe_count(4, 2, {1, 2, 4, 8}) == 8);   // pipeline: more, smaller micro-batches
  BOOST_TEST(probe_count(8, 2, {1, 2, 4, 8}) == 4);   // none smaller left: the other way
  BOOST_TEST(probe_count(4, 1, {1, 2, 4, 8}) == 2);   // one stage: fewer, larger ones
  BOOST_TEST(probe_count(4, 1, {4, 8}) == 8);         // larger ones do not fit: the other way
  BOOST_TEST(probe_count(1, 2, {1}) == 0);            // nothing else
}

BOOST_AUTO_TEST_SUITE_END()
