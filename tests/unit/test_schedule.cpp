// Pipeline schedules: simulated across all stages (pipeline/timeline.hpp), every schedule
// completes — every send has its receive and no stage waits forever —, runs each micro-batch's
// passes in dependency order (no B before its F, no W before its B), holds no more
// micro-batches than its slots, and idles as bubble_fraction says; the block split adds up.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "pipeline/schedule.hpp"
#include "pipeline/timeline.hpp"

using namespace trident::pipeline;

namespace {

const Schedule kSchedules[] = {Schedule::OneFOneB, Schedule::GPipe, Schedule::ZeroBubbleH1};

std::vector<std::vector<Action>> lists_of(Schedule schedule, int stages, int m) {
  std::vector<std::vector<Action>> lists;
  for (int s = 0; s < stages; ++s) lists.push_back(stage_actions(schedule, s, stages, m));
  return lists;
}

std::string letters(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) {
    if (!out.empty()) out += ' ';
    out += a.pass == Pass::Forward ? "F" : a.pass == Pass::InputGradient ? "B" : a.pass == Pass::WeightGradient ? "W" : "X";
    out += std::to_string(a.micro_batch);
  }
  return out;
}

// Within one stage: F i before B i (or the whole backward), B i before W i, each once.
std::string order_problem(const std::vector<Action>& actions, int m) {
  std::vector<int> forward(m, -1), input(m, -1), weights(m, -1);
  for (int k = 0; k < int(actions.size()); ++k) {
    const Action& a = actions[k];
    std::vector<int>& at = a.pass == Pass::Forward ? forward : a.pass == Pass::WeightGradient ? weights : input;
    if (at[a.micro_batch] >= 0) return "a pass runs twice: " + letters(actions);
    at[a.micro_batch] = k;
    if (a.pass == Pass::Backward) weights[a.micro_batch] = k;
  }
  for (int i = 0; i < m; ++i) {
    if (forward[i] < 0 || input[i] < 0 || weights[i] < 0) return "micro-batch " + std::to_string(i) + " incomplete";
    if (!(forward[i] < input[i] && input[i] <= weights[i])) return "micro-batch " + std::to_string(i) + " out of order";
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(schedule)

BOOST_AUTO_TEST_CASE(schedules_complete_within_their_slots) {
  for (Schedule schedule : kSchedules)
    for (int stages = 1; stages <= 8; ++stages)
      for (int m = 1; m <= 4 * stages + 1; ++m) {
        if (schedule != Schedule::GPipe && m < stages) continue;  // rejected by the deck check
        const auto lists = lists_of(schedule, stages, m);
        Timeline t;
        BOOST_REQUIRE_NO_THROW(t = simulate(lists, m, PassTimes{}));
        for (int s = 0; s < stages; ++s) {
          const auto& actions = lists[s];
          BOOST_TEST(order_problem(actions, m) == "", schedule_name(schedule) << " p " << stages << " m " << m);
          BOOST_TEST(t.peak_held[s] <= slots_needed(schedule, s, stages, m));
          BOOST_REQUIRE_EQUAL(actions.size(), size_t((splits_backward(schedule) ? 3 : 2) * m));
          BOOST_TEST((actions.back().pass == (splits_backward(schedule) ? Pass::WeightGradient : Pass::Backward)));
          BOOST_TEST(actions.back().micro_batch == m - 1);  // the gradients become final there
        }
      }
}

BOOST_AUTO_TEST_CASE(one_f_one_b_warmup) {
  // Stage 0 of 4: three forwards, then F B pairs, then three backwards.
  BOOST_TEST(letters(stage_actions(Schedule::OneFOneB, 0, 4, 8)) ==
             "F0 F1 F2 F3 X0 F4 X1 F5 X2 F6 X3 F7 X4 X5 X6 X7");
  BOOST_TEST(slots_needed(Schedule::OneFOneB, 0, 4, 8) == 4);
  BOOST_TEST(slots_needed(Schedule::OneFOneB, 3, 4, 8) == 1);
  BOOST_TEST(slots_needed(Schedule::GPipe, 3, 4, 8) == 8);
}

// Qi et al.'s ZB-H1 for p = 4: 1F1B's F/B order, stage s's first W after its (s + 1)-th B.
BOOST_AUTO_TEST_CASE(zero_bubble_h1_order) {
  BOOST_TEST(letters(stage_actions(Schedule::ZeroBubbleH1, 0, 4, 8)) ==
             "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7");
  BOOST_TEST(letters(stage_actions(Schedule::ZeroBubbleH1, 3, 4, 8)) ==
             "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7");
  for (int s = 0; s < 4; ++s) BOOST_TEST(slots_needed(Schedule::ZeroBubbleH1, s, 4, 8) == 4);
}

// With every pass time equal, ZB-H1 idles a third of 1F1B: (p − 1) of 3m + p − 1 units against
// (p − 1) of m + p − 1 micro-batch times.
BOOST_AUTO_TEST_CASE(zero_bubble_h1_bubble) {
  const double one = simulate(lists_of(Schedule::OneFOneB, 4, 8), 8, PassTimes{}).bubble();
  const double zb = simulate(lists_of(Schedule::ZeroBubbleH1, 4, 8), 8, PassTimes{}).bubble();
  BOOST_TEST(one == 3.0 / 11, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(zb == 3.0 / 27, boost::test_tools::tolerance(1e-12));
}

// bubble_fraction's closed forms are the simulated timelines', for random pass times.
BOOST_AUTO_TEST_CASE(bubble_fraction_is_the_timeline) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.3, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    const double f = time(rng), b = time(rng);
    double w = time(rng);
    if (trial % 2 == 0) w = std::min(w, std::min(f, b));  // the closed form's range; else the fallback
    const int p = 2 + trial % 7, m = p + trial % (3 * p + 1);
    for (Schedule schedule : kSchedules) {
      const double simulated = simulate(lists_of(schedule, p, m), m, PassTimes{f, b, w}).bubble();
      BOOST_TEST(bubble_fraction(schedule, p, m, f, b, w) == simulated, boost::test_tools::tolerance(1e-9));
    }
  }
}

BOOST_AUTO_TEST_CASE(timeline_detects_deadlock_and_missing_passes) {
  // Stage 0 waits for micro-batch 1's gradient before sending its forward: neither can go on.
  const std::vector<std::vector<Action>> stuck = {
      {{Pass::Forward, 0}, {Pass::Backward, 0}, {Pass::Forward, 1}, {Pass::Backward, 1}},
      {{Pass::Forward, 1}, {Pass::Backward, 1}, {Pass::Forward, 0}, {Pass::Backward, 0}}};
  BOOST_CHECK_THROW(simulate(stuck, 2, PassTimes{}), std::runtime_error);
  const std::vector<std::vector<Action>> missing = {{{Pass::Forward, 0}, {Pass::InputGradient, 0}}};
  BOOST_CHECK_THROW(simulate(missing, 1, PassTimes{}), std::runtime_error);
  const std::vector<std::vector<Action>> weights_first = {
      {{Pass::Forward, 0}, {Pass::WeightGradient, 0}, {Pass::InputGradient, 0}}};
  BOOST_CHECK_THROW(simulate(weights_first, 1, PassTimes{}), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(block_split) {
  BOOST_TEST((stage_layer_counts(8, 4, {}) == std::vector<int>{2, 2, 2, 2}));
  BOOST_TEST((stage_layer_counts(10, 4, {}) == std::vector<int>{2, 3, 3, 2}));
  BOOST_TEST((stage_layer_counts(7, 2, {}) == std::vector<int>{4, 3}));
  BOOST_TEST((stage_layer_counts(16, 4, {3, 5, 5, 3}) == std::vector<int>{3, 5, 5, 3}));
  for (int L = 1; L <= 20; ++L)
    for (int p = 1; p <= L; ++p) {
      const auto counts = stage_layer_counts(L, p, {});
      BOOST_TEST(std::accumulate(counts.begin(), counts.end(), 0) == L);
      BOOST_TEST(*std::min_element(counts.begin(), counts.end()) >= 1);
    }
}

BOOST_AUTO_TEST_SUITE_END()
