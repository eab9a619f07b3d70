// Pipeline schedules: simulated across all stages (pipeline/timeline.hpp), every schedule
// completes — every send has its receive and no stage waits forever —, runs each micro-batch's
// passes in dependency order (no B before its F, no W before its B), holds no more
// micro-batches than its slots, and idles as bubble_fraction says; the block split adds up.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "pipeline/schedule.hpp"
#include "pipeline/timeline.hpp"

using namespace trident::pipeline;

namespace {

const Schedule kSchedules[] = {Schedule::OneFOneB, Schedule::GPipe, Schedule::ZeroBubbleH1};

std::vector<std::vector<Action>> lists_of(Schedule schedule, int stages, int m, int chunks = 1) {
  std::vector<std::vector<Action>> lists;
  for (int s = 0; s < stages; ++s) lists.push_back(stage_actions(schedule, s, stages, m, chunks));
  return lists;
}

// "F3" (or "F3.1": micro-batch 3 in chunk 1 where there are chunks), B, W, X (a whole backward).
std::string letters(const std::vector<Action>& actions, bool chunks = false) {
  std::string out;
  for (const Action& a : actions) {
    if (!out.empty()) out += ' ';
    out += a.pass == Pass::Forward ? "F" : a.pass == Pass::InputGradient ? "B" : a.pass == Pass::WeightGradient ? "W" : "X";
    out += std::to_string(a.micro_batch) + (chunks ? "." + std::to_string(a.chunk) : "");
  }
  return out;
}

// Within one stage and chunk: F i before B i (or the whole backward), B i before W i, each once;
// micro-batches in order within each kind of pass.
std::string order_problem(const std::vector<Action>& actions, int m, int chunks) {
  for (int c = 0; c < chunks; ++c) {
    std::vector<int> forward(m, -1), input(m, -1), weights(m, -1);
    int last[3] = {-1, -1, -1};  // the micro-batch of the chunk's last F, B, W
    for (int k = 0; k < int(actions.size()); ++k) {
      const Action& a = actions[k];
      if (a.chunk != c) continue;
      const int kind = a.pass == Pass::Forward ? 0 : a.pass == Pass::WeightGradient ? 2 : 1;
      std::vector<int>& at = kind == 0 ? forward : kind == 2 ? weights : input;
      if (at[a.micro_batch] >= 0) return "a pass runs twice: " + letters(actions, true);
      if (a.micro_batch != last[kind] + 1) return "micro-batches out of order: " + letters(actions, true);
      last[kind] = a.micro_batch;
      at[a.micro_batch] = k;
      if (a.pass == Pass::Backward) weights[a.micro_batch] = k, last[2] = a.micro_batch;
    }
    for (int i = 0; i < m; ++i) {
      if (forward[i] < 0 || input[i] < 0 || weights[i] < 0) return "micro-batch " + std::to_string(i) + " incomplete";
      if (!(forward[i] < input[i] && input[i] <= weights[i])) return "micro-batch " + std::to_string(i) + " out of order";
    }
  }
  return "";
}

// The runner's own waits (pipeline/runner.hpp), with sends that complete only once their
// receive is posted (MPI's rendezvous for large messages): before F of a slot, the slot's last
// activation send; before B, the last gradient send (with chunks, the slot's: a buffer per
// slot); before a zero-bubble B, also the slot's activation send. A receive is posted once its action's waits
// are over. Runs the stages in rounds; false (and `why`) when no stage can go on.
bool runs_with_rendezvous(Schedule schedule, int p, int m, int chunks, std::string& why) {
  const auto lists = lists_of(schedule, p, m, chunks);
  std::vector<std::vector<int>> slots(p);
  for (int s = 0; s < p; ++s) slots[s] = chunk_slots(schedule, s, p, m, chunks);
  const int V = p * chunks;
  struct Rank { size_t pc = 0; bool posted = false; };
  std::vector<Rank> ranks(p);
  // Per virtual stage and micro-batch: F / B done; and where each rank's actions sit in its list.
  std::vector<std::vector<char>> forward_done(V, std::vector<char>(m)), input_done = forward_done;
  std::vector<std::map<std::pair<int, int>, size_t>> index(p);  // (pass kind, u·m + i) → position
  auto key = [&](bool forward, int u, int i) { return std::make_pair(forward ? 0 : 1, u * m + i); };
  for (int s = 0; s < p; ++s)
    for (size_t k = 0; k < lists[s].size(); ++k) {
      const Action& a = lists[s][k];
      if (a.pass != Pass::WeightGradient) index[s][key(a.pass == Pass::Forward, a.chunk * p + s, a.micro_batch)] = k;
    }
  // Whether the receive of (kind, u, i) on u's rank is posted.
  auto posted = [&](bool forward, int u, int i) {
    const int s = u % p;
    const size_t at = index[s].at(key(forward, u, i));
    return ranks[s].pc > at || (ranks[s].pc == at && ranks[s].posted);
  };
  // The send made by stage s's earlier action of this kind — in this chunk (chunk >= 0), and
  // slot (slot >= 0) — completed?
  auto earlier_send_done = [&](int s, size_t pc, bool forward, int chunk, int slot) {
    for (size_t k = pc; k-- > 0;) {
      const Action& a = lists[s][k];
      if ((a.pass == Pass::Forward) != forward || a.pass == Pass::WeightGradient) continue;
      if (chunk >= 0 && a.chunk != chunk) continue;
      if (slot >= 0 && a.micro_batch % slots[s][a.chunk] != slot) continue;
      const int u = a.chunk * p + s;
      if (forward) return u == V - 1 || posted(true, u + 1, a.micro_batch);
      return u == 0 || posted(false, u - 1, a.micro_batch);
    }
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      Rank& r = ranks[s];
      if (r.pc == lists[s].size()) continue;
      const Action& a = lists[s][r.pc];
      const int u = a.chunk * p + s, i = a.micro_batch, slot = i % slots[s][a.chunk];
      if (!r.posted) {
        bool waits_over = true;
        if (a.pass == Pass::Forward) waits_over = earlier_send_done(s, r.pc, true, a.chunk, slot);
        if (a.pass == Pass::Backward || a.pass == Pass::InputGradient)
          waits_over = (chunks > 1 ? earlier_send_done(s, r.pc, false, a.chunk, slot)
                                   : earlier_send_done(s, r.pc, false, -1, -1)) &&
                       (a.pass != Pass::InputGradient || earlier_send_done(s, r.pc, true, a.chunk, slot));
        if (!waits_over) continue;
        r.posted = true;
        progress = true;
      }
      const bool received = a.pass == Pass::Forward ? u == 0 || forward_done[u - 1][i]
                            : a.pass == Pass::WeightGradient ? true
                                                             : u == V - 1 || input_done[u + 1][i];
      if (!received) continue;
      if (a.pass == Pass::Forward) forward_done[u][i] = 1;
      else if (a.pass != Pass::WeightGradient) input_done[u][i] = 1;
      ++r.pc, r.posted = false;
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s)
    if (ranks[s].pc < lists[s].size()) {
      why = "stage " + std::to_string(s) + " waits forever at action " + std::to_string(ranks[s].pc);
      return false;
    }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(schedule)

// The runner's waits for its sends cannot deadlock, whichever way MPI completes a send.
BOOST_AUTO_TEST_CASE(runner_waits_cannot_deadlock) {
  for (Schedule schedule : kSchedules)
    for (int chunks : {1, 2, 3})
      for (int p = 2; p <= 8; ++p)
        for (int m = p; m <= 4 * p; m += (chunks > 1 ? p : 1)) {
          if (chunks > 1 && schedule != Schedule::OneFOneB) continue;
          std::string why;
          BOOST_TEST(runs_with_rendezvous(schedule, p, m, chunks, why),
                     schedule_name(schedule) << " v " << chunks << " p " << p << " m " << m << ": " << why);
        }
}

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
          BOOST_TEST(order_problem(actions, m, 1) == "", schedule_name(schedule) << " p " << stages << " m " << m);
          BOOST_TEST(t.peak_held[s] <= slots_needed(schedule, s, stages, m));
          BOOST_REQUIRE_EQUAL(actions.size(), size_t((splits_backward(schedule) ? 3 : 2) * m));
          BOOST_TEST((actions.back().pass == (splits_backward(schedule) ? Pass::WeightGradient : Pass::Backward)));
          BOOST_TEST(actions.back().micro_batch == m - 1);  // the gradients become final there
        }
      }
}

// Interleaved 1F1B, v = 2 and 3 chunks per stage: p = 2 … 8, m = p … 4p (multiples of p).
BOOST_AUTO_TEST_CASE(interleaved_completes_within_its_slots) {
  for (int chunks : {2, 3})
    for (int stages = 1; stages <= 8; ++stages)
      for (int m = stages; m <= 4 * stages; m += stages) {
        const auto lists = lists_of(Schedule::OneFOneB, stages, m, chunks);
        Timeline t;
        BOOST_REQUIRE_NO_THROW(t = simulate(lists, m, PassTimes{}));
        for (int s = 0; s < stages; ++s) {
          BOOST_TEST(order_problem(lists[s], m, chunks) == "", "v " << chunks << " p " << stages << " m " << m);
          const std::vector<int> slots = chunk_slots(Schedule::OneFOneB, s, stages, m, chunks);
          BOOST_TEST(t.peak_held[s] <= *std::max_element(slots.begin(), slots.end()));
          BOOST_REQUIRE_EQUAL(lists[s].size(), size_t(2 * m * chunks));
          // The chunk holding the first blocks finishes last: its backward of m − 1 ends the stage.
          BOOST_TEST((lists[s].back().chunk == 0 && lists[s].back().micro_batch == m - 1));
        }
        // (p − 1)/(v·m + p − 1): the interleaved bubble, with a chunk's passes 1/v of the stage's.
        BOOST_TEST(t.bubble() == bubble_fraction(Schedule::OneFOneB, stages, m, 1, 1, 1, chunks),
                   boost::test_tools::tolerance(1e-12));
        BOOST_TEST(bubble_fraction(Schedule::OneFOneB, stages, m, 1, 1, 1, chunks) ==
                       double(stages - 1) / (chunks * m + stages - 1), boost::test_tools::tolerance(1e-12));
      }
  // Megatron-LM's order for p = 2, v = 2, m = 4 (micro-batch.chunk).
  BOOST_TEST(letters(stage_actions(Schedule::OneFOneB, 0, 2, 4, 2), true) ==
             "F0.0 F1.0 F0.1 F1.1 F2.0 X0.1 F3.0 X1.1 F2.1 X0.0 F3.1 X1.0 X2.1 X3.1 X2.0 X3.0");
  BOOST_TEST(letters(stage_actions(Schedule::OneFOneB, 1, 2, 4, 2), true) ==
             "F0.0 F1.0 F0.1 X0.1 F1.1 X1.1 F2.0 X0.0 F3.0 X1.0 F2.1 X2.1 F3.1 X3.1 X2.0 X3.0");
  BOOST_CHECK_THROW(stage_actions(Schedule::OneFOneB, 0, 4, 6, 2), std::invalid_argument);      // m not a multiple of p
  BOOST_CHECK_THROW(stage_actions(Schedule::ZeroBubbleH1, 0, 4, 8, 2), std::invalid_argument);  // no interleaved ZB-H1
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
