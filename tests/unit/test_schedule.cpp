// Pipeline schedules: simulated across all stages, every schedule completes (no stage waits
// forever), respects the data dependencies, holds no more micro-batches than its slots, and
// the block split adds up.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "pipeline/schedule.hpp"

using namespace trident::pipeline;

namespace {

// Runs the stages' action lists in rounds: an action may run once its inputs exist (forward i
// on stage s needs forward i on s−1; backward i needs forward i here and backward i on s+1).
bool simulate(Schedule schedule, int stages, int m, std::string& why) {
  std::vector<std::vector<Action>> lists;
  for (int s = 0; s < stages; ++s) lists.push_back(stage_actions(schedule, s, stages, m));
  std::vector<std::vector<bool>> fwd(stages, std::vector<bool>(m)), bwd = fwd;
  std::vector<size_t> next(stages, 0);
  std::vector<int> held(stages, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      if (next[s] == lists[s].size()) continue;
      const Action a = lists[s][next[s]];
      const bool ready = a.forward ? (s == 0 || fwd[s - 1][a.micro_batch])
                                   : (fwd[s][a.micro_batch] && (s == stages - 1 || bwd[s + 1][a.micro_batch]));
      if (!ready) continue;
      (a.forward ? fwd : bwd)[s][a.micro_batch] = true;
      held[s] += a.forward ? 1 : -1;
      if (held[s] > slots_needed(schedule, s, stages, m)) {
        why = "stage " + std::to_string(s) + " holds too many micro-batches";
        return false;
      }
      ++next[s];
      progress = true;
    }
  }
  for (int s = 0; s < stages; ++s)
    if (next[s] != lists[s].size()) {
      why = "stage " + std::to_string(s) + " is stuck";
      return false;
    }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(schedule)

BOOST_AUTO_TEST_CASE(schedules_complete_within_their_slots) {
  for (Schedule schedule : {Schedule::OneFOneB, Schedule::GPipe})
    for (int stages = 1; stages <= 8; ++stages)
      for (int m = 1; m <= 16; ++m) {
        if (schedule == Schedule::OneFOneB && m < stages) continue;  // rejected by the deck check
        std::string why;
        BOOST_TEST(simulate(schedule, stages, m, why), "stages " << stages << " m " << m << ": " << why);
        for (int s = 0; s < stages; ++s) {
          const auto actions = stage_actions(schedule, s, stages, m);
          BOOST_REQUIRE_EQUAL(actions.size(), size_t(2 * m));
          BOOST_TEST(!actions.back().forward);
          BOOST_TEST(actions.back().micro_batch == m - 1);
        }
      }
}

BOOST_AUTO_TEST_CASE(one_f_one_b_warmup) {
  const auto actions = stage_actions(Schedule::OneFOneB, 0, 4, 8);
  // Stage 0 of 4: three forwards, then F B pairs, then three backwards.
  BOOST_TEST((actions[0].forward && actions[1].forward && actions[2].forward));
  BOOST_TEST((actions[3].forward && !actions[4].forward && actions[4].micro_batch == 0));
  BOOST_TEST(slots_needed(Schedule::OneFOneB, 0, 4, 8) == 4);
  BOOST_TEST(slots_needed(Schedule::OneFOneB, 3, 4, 8) == 1);
  BOOST_TEST(slots_needed(Schedule::GPipe, 3, 4, 8) == 8);
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
