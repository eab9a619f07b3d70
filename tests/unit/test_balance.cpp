// The balance arithmetic (pipeline/balance.hpp): figures per stage and replica, the min-max
// allocation behind the pipeline re-split and the replica shares, against exhaustive search.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <numeric>
#include <vector>

#include "pipeline/balance.hpp"

using namespace trident::pipeline;

namespace {

// The best maximum over every allocation of `total` units, each worker at least `least`.
double exhaustive_best(const std::vector<double>& unit, const std::vector<double>& fixed, int total, int least = 1) {
  std::vector<int> counts(unit.size(), least);
  double best = 1e300;
  std::function<void(size_t, int)> visit = [&](size_t w, int left) {
    if (w + 1 == unit.size()) {
      counts[w] = left;
      best = std::min(best, predicted_max_ms(unit, fixed, counts));
      return;
    }
    for (int n = least; n <= left - least * int(unit.size() - w - 1); ++n) counts[w] = n, visit(w + 1, left - n);
  };
  visit(0, total);
  return best;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(balance)

BOOST_AUTO_TEST_CASE(figures_take_the_slowest_rank_of_each_stage_and_replica) {
  // 4 ranks: stages 0,0,1,1 and replicas 0,1,0,1; rank 3 slow.
  const std::vector<RankTimes> ranks{{1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0}, {2, 4, 0}};
  const BalanceFigures f = summarise(ranks, {0, 0, 1, 1}, {0, 1, 0, 1}, 2, 2);
  BOOST_TEST(f.stage_ms(0) == 3.0);
  BOOST_TEST(f.stage_ms(1) == 6.0);
  BOOST_TEST(f.stage_edge_ms[0] == 0.5);
  BOOST_TEST(f.replica_ms(1) == 6.0);
  BOOST_TEST(f.stage_ratio() == 2.0);
  BOOST_TEST(f.replica_ratio() == 2.0);
  const BalanceFigures one = summarise({{1, 1, 0}}, {0}, {0}, 1, 1);
  BOOST_TEST(one.stage_ratio() == 1.0);
}

BOOST_AUTO_TEST_CASE(a_slow_stage_gets_fewer_blocks) {
  // 8 blocks on 2 stages of 4; stage 1 twice as slow per block: 5,3 balances 5 against 6.
  const std::vector<double> unit{1, 2}, fixed{0, 0};
  const std::vector<int> split = minmax_allocation(unit, fixed, 8, {4, 4});
  BOOST_TEST((split == std::vector<int>{5, 3}));
  BOOST_TEST(predicted_max_ms(unit, fixed, split) == 6.0);
  BOOST_TEST(predicted_max_ms(unit, fixed, {4, 4}) == 8.0);
}

BOOST_AUTO_TEST_CASE(a_balanced_split_is_kept) {
  const std::vector<double> unit{1, 1, 1, 1}, fixed{0.5, 0, 0, 0.5};
  // 9 blocks: 2,3,2,2 and 2,2,3,2 are equally good; the current one stays.
  BOOST_TEST((minmax_allocation(unit, fixed, 9, {2, 2, 3, 2}) == std::vector<int>{2, 2, 3, 2}));
  BOOST_TEST((minmax_allocation(unit, fixed, 9, {2, 3, 2, 2}) == std::vector<int>{2, 3, 2, 2}));
}

BOOST_AUTO_TEST_CASE(the_greedy_allocation_is_optimal) {
  // Pseudo-random costs (a fixed LCG): the greedy maximum equals the exhaustive one.
  unsigned state = 12345;
  auto next = [&] { return (state = state * 1103515245u + 12345u) % 1000 / 100.0 + 0.1; };
  for (int trial = 0; trial < 200; ++trial) {
    const int workers = 2 + trial % 3, total = workers + trial % 9;
    std::vector<double> unit, fixed;
    for (int w = 0; w < workers; ++w) unit.push_back(next()), fixed.push_back(trial % 2 ? next() : 0.0);
    const std::vector<int> counts = minmax_allocation(unit, fixed, total);
    int sum = 0;
    for (int n : counts) {
      sum += n;
      BOOST_TEST(n >= 1);
    }
    BOOST_TEST(sum == total);
    BOOST_TEST(predicted_max_ms(unit, fixed, counts) == exhaustive_best(unit, fixed, total), "trial " << trial);
    std::vector<int> current(workers, 1);  // from any current split: still optimal, and a valid split
    current[trial % workers] += total - workers;
    const std::vector<int> near = minmax_allocation(unit, fixed, total, current);
    BOOST_TEST(predicted_max_ms(unit, fixed, near) == exhaustive_best(unit, fixed, total), "trial " << trial);
    BOOST_TEST(std::accumulate(near.begin(), near.end(), 0) == total);
    // With `least` units a worker (the chunks of an interleaved stage), still optimal.
    const int least = 1 + trial % 3, more = workers * least + trial % 7;
    const std::vector<int> floor = minmax_allocation(unit, fixed, more, {}, least);
    BOOST_TEST(*std::min_element(floor.begin(), floor.end()) >= least);
    BOOST_TEST(std::accumulate(floor.begin(), floor.end(), 0) == more);
    BOOST_TEST(predicted_max_ms(unit, fixed, floor) == exhaustive_best(unit, fixed, more, least), "trial " << trial);
  }
}

BOOST_AUTO_TEST_CASE(stage_costs_split_the_stage_time_over_its_blocks) {
  BalanceFigures f;
  f.stage_forward_ms = {3, 4}, f.stage_backward_ms = {5, 8}, f.stage_edge_ms = {2, 4};
  std::vector<double> unit, fixed;
  stage_costs(f, {3, 2}, &unit, &fixed);
  BOOST_TEST((fixed == std::vector<double>{2, 4}));
  BOOST_TEST((unit == std::vector<double>{2, 4}));
  BOOST_TEST(split_text({3, 5}) == "3,5");
}

BOOST_AUTO_TEST_CASE(a_split_moves_only_above_threshold_and_margin) {
  BalanceFigures f;
  f.stage_edge_ms = {0, 0};
  f.stage_forward_ms = {4, 8}, f.stage_backward_ms = {0, 0};  // 4,4 blocks: stage 1 twice as slow per block
  Decision d = decide_split(f, {4, 4}, 2, 1.15, 0.05);
  BOOST_TEST(d.move);
  BOOST_TEST((d.counts == std::vector<int>{5, 3}));
  BOOST_TEST(d.current_ms == 8.0);
  BOOST_TEST(d.predicted_ms == 6.0);
  BOOST_TEST(!decide_split(f, {4, 4}, 2, 1.15, 0.5).move);   // a 33% gain is not above a 50% margin
  BOOST_TEST(!decide_split(f, {4, 4}, 2, 2.5, 0.05).move);   // ratio 2 within a threshold of 2.5
  f.stage_forward_ms = {4, 4.4};                          // 10% apart: moving a block would be worse
  d = decide_split(f, {4, 4}, 2, 1.05, 0.05);
  BOOST_TEST(!d.move);
  BOOST_TEST((d.counts == std::vector<int>{4, 4}));
}

BOOST_AUTO_TEST_CASE(an_interleaved_split_moves_blocks_between_a_stages_chunks) {
  // p = 2, v = 2: virtual stages 0..3 are stage 0 chunk 0, stage 1 chunk 0, stage 0 chunk 1,
  // stage 1 chunk 1; 3,3,3,3 gives each stage 6 blocks. Stage 1 twice as slow per block: its
  // total goes 6 -> 4 (8 against 8), taken from its chunks, most first, the later of equals.
  BalanceFigures f;
  f.stage_edge_ms = {0, 0};
  f.stage_forward_ms = {6, 12}, f.stage_backward_ms = {0, 0};
  const Decision d = decide_split(f, {3, 3, 3, 3}, 2, 1.15, 0.05);
  BOOST_TEST(d.move);
  BOOST_TEST((d.counts == std::vector<int>{4, 2, 4, 2}));
  BOOST_TEST(d.current_ms == 12.0);
  BOOST_TEST(d.predicted_ms == 8.0);
  BOOST_TEST(d.why.find("chunks 3,3,3,3 -> 4,2,4,2, stages 6,6 -> 8,4") == 0, d.why);
  // Every chunk keeps a block: stage 1 at 10x per block still keeps one in each of its two.
  f.stage_forward_ms = {6, 60};
  const Decision most = decide_split(f, {3, 3, 3, 3}, 2, 1.15, 0.05);
  BOOST_TEST((most.counts == std::vector<int>{5, 1, 5, 1}));
}

BOOST_AUTO_TEST_CASE(spreading_a_stage_keeps_its_chunk_structure) {
  // p = 2, v = 3: stage 0 holds virtual stages 0, 2, 4 (1, 3, 2 blocks), stage 1 1, 3, 5 (2, 2, 2).
  const std::vector<int> current{1, 2, 3, 2, 2, 2};
  BOOST_TEST((spread_over_chunks(current, {6, 6}, 2) == current));           // the same totals: nothing moves
  BOOST_TEST((spread_over_chunks(current, {7, 5}, 2) == std::vector<int>{2, 2, 3, 2, 2, 1}));
  BOOST_TEST((spread_over_chunks(current, {5, 7}, 2) == std::vector<int>{1, 3, 2, 2, 2, 2}));
  BOOST_TEST((spread_over_chunks(current, {3, 9}, 2) == std::vector<int>{1, 3, 1, 3, 1, 3}));
  BOOST_CHECK_THROW(spread_over_chunks(current, {2, 10}, 2), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_slow_replica_gets_fewer_micro_batches) {
  BalanceFigures f;
  f.replica_forward_ms = {1, 1.5}, f.replica_backward_ms = {0, 0};  // replica 1 at 1.5x
  const Decision d = decide_shares(f, {4, 4}, 1.15, 0.1);
  BOOST_TEST(d.move);
  BOOST_TEST((d.counts == std::vector<int>{5, 3}));  // 5 ms and 4.5 ms, against 6 ms now
  BOOST_TEST(d.current_ms == 6.0);
  BOOST_TEST(d.predicted_ms == 5.0);
  f.replica_forward_ms = {1, 1.1};
  BOOST_TEST(!decide_shares(f, {4, 4}, 1.15, 0.1).move);
  // Interleaved with p = 2: shares move two micro-batches at a time.
  f.replica_forward_ms = {1, 2};
  const Decision grouped = decide_shares(f, {4, 4}, 1.15, 0.1, 2);
  BOOST_TEST(grouped.move);
  BOOST_TEST((grouped.counts == std::vector<int>{6, 2}));  // 6 ms and 4 ms, against 8 ms now
  BOOST_TEST(grouped.predicted_ms == 6.0);
}

BOOST_AUTO_TEST_CASE(hysteresis_confirms_then_cools_down) {
  Hysteresis h;
  Decision d;
  auto proposal = [&](std::vector<int> counts) {
    d.counts = counts, d.move = true, d.why.clear();
    return d;
  };
  d = proposal({5, 3});
  h.apply(d, 10, 50);
  BOOST_TEST(!d.move);  // first proposal
  d.counts = {4, 4}, d.move = false;
  h.apply(d, 20, 50);   // no imbalance in between: the proposal lapses
  d = proposal({6, 2});
  h.apply(d, 25, 50);
  BOOST_TEST(!d.move);
  d = proposal({5, 3});
  h.apply(d, 30, 50);
  BOOST_TEST(d.move);   // confirmed by the one before (the newer split is made)
  BOOST_TEST(h.last_move == 30);
  d = proposal({5, 3});
  h.apply(d, 40, 50);
  d = proposal({5, 3});
  h.apply(d, 50, 50);
  BOOST_TEST(!d.move);  // confirmed but within the cooldown
  BOOST_TEST(d.why.find("cooldown") != std::string::npos);
  d = proposal({5, 3});
  h.apply(d, 80, 50);
  BOOST_TEST(d.move);
}

BOOST_AUTO_TEST_SUITE_END()
