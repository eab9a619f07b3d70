// Load balance of a running job (issue 18): the per-stage and per-replica times of a measurement
// interval, summarised the same way on every rank, and the min-max allocation that both the
// pipeline re-split (blocks over stages) and the data-replica shares (micro-batches over
// replicas) are. Pure arithmetic: the trainer gathers the times and applies the decisions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::pipeline {

// One rank's compute over an interval, per micro-batch (ms). edge: the part of forward plus
// backward spent in the embedding (first stage) and the head (last stage), 0 elsewhere.
struct RankTimes {
  double forward_ms = 0, backward_ms = 0, edge_ms = 0;
};

// Per stage and per replica: the slowest of its ranks (the pipeline and the step wait for it).
struct BalanceFigures {
  std::vector<double> stage_forward_ms, stage_backward_ms, stage_edge_ms;  // (stages)
  std::vector<double> replica_forward_ms, replica_backward_ms;             // (replicas)
  // max/min of forward + backward over the stages, over the replicas (1 with one of them).
  double stage_ratio() const;
  double replica_ratio() const;
  double stage_ms(int stage) const { return stage_forward_ms[stage] + stage_backward_ms[stage]; }
  double replica_ms(int replica) const { return replica_forward_ms[replica] + replica_backward_ms[replica]; }
};

// per_rank[r] belongs to stage stage_of[r] and replica replica_of[r].
BalanceFigures summarise(const std::vector<RankTimes>& per_rank, const std::vector<int>& stage_of,
                         const std::vector<int>& replica_of, int stages, int replicas);

// Units (blocks, micro-batches) over workers (stages, replicas) in a fixed order: worker w
// takes n_w ≥ `least` units and the time fixed_ms[w] + n_w · unit_ms[w]; the result minimises the
// slowest worker's time, Σ n_w = total. Of the equally good answers, the one nearest `current`
// (when given): the fewest units move, and an optimal `current` stays as it is. Greedy: each unit goes to the worker that ends lowest with it — optimal for a
// maximum of increasing linear costs.
std::vector<int> minmax_allocation(const std::vector<double>& unit_ms, const std::vector<double>& fixed_ms,
                                   int total, const std::vector<int>& current = {}, int least = 1);

// The predicted slowest worker of an allocation under the same costs.
double predicted_max_ms(const std::vector<double>& unit_ms, const std::vector<double>& fixed_ms,
                        const std::vector<int>& counts);

// The pipeline's costs from the measured figures: a stage's time per micro-batch without its
// embedding/head part, divided over its blocks (the stage's device rate per block), and that
// edge part as a fixed cost of the first and the last stage.
void stage_costs(const BalanceFigures& figures, const std::vector<int>& stage_layers, std::vector<double>* unit_ms,
                 std::vector<double>* fixed_ms);

// Whether to re-allocate after a measurement — blocks over stages (a re-split) or micro-batches
// over replicas (shares): only when the workers are imbalanced (max/min above `threshold`) and
// the best allocation predicts the slowest worker faster by more than `margin` (a fraction) —
// what keeps noise and a near-balance from moving work to and fro.
struct Decision {
  std::vector<int> counts;   // the best allocation (the current one when nothing is better)
  double current_ms = 0;     // the slowest worker now (stage: per micro-batch; replica: per step)
  double predicted_ms = 0;   // the slowest worker of `counts`, predicted
  bool move = false;
  std::string why;           // the figures behind the decision, for the log (a move: without its verdict)
  double gain() const { return predicted_ms > 0 ? current_ms / predicted_ms - 1 : 0; }
};
// Blocks over stages, by stage_costs. `current`: blocks per virtual stage u = chunk·stages +
// stage, in the model's order (per stage when it has `stages` entries). With v chunks a stage,
// the stages' totals are allocated (v blocks a stage at least) and each stage's change is spread
// over its own chunks (spread_over_chunks): the chunk structure stays, and a stage's time is
// what the measurement sees and the pipeline waits for.
Decision decide_split(const BalanceFigures& figures, const std::vector<int>& current, int stages, double threshold,
                      double margin);
// A stage's new total over its chunks, nearest the chunks' `current` counts (blocks per virtual
// stage, as above): a block added goes to the stage's chunk holding fewest (the earliest of
// equals), one taken leaves the chunk holding most (the latest of equals, away from the
// embedding's chunk 0); every chunk keeps a block.
std::vector<int> spread_over_chunks(const std::vector<int>& current, const std::vector<int>& stage_totals, int stages);
// Micro-batches over replicas: a replica's step is its share times its time per micro-batch.
// Shares move in groups of `group` micro-batches (the interleaved schedule runs a multiple of
// the stages; 1 otherwise); `current` are multiples of it.
Decision decide_shares(const BalanceFigures& figures, const std::vector<int>& current, double threshold, double margin,
                       int group = 1);

// The hysteresis after the margin, for one kind of move: none within `cooldown` steps of the
// last, and none on one measurement alone — the one before must have proposed a move too (a
// process that took a core for one interval does not move work); the newer proposal is made.
struct Hysteresis {
  std::vector<int> proposed;  // the last measurement's proposal (empty: none)
  int64_t last_move = -1;     // the step after which the last move happened (-1: never)
  // Turns decision.move off (and says why in decision.why) unless the move may happen now,
  // after step `completed`; records a move that may.
  void apply(Decision& decision, int64_t completed, int64_t cooldown);
};

// "3,5" — a split as parallel.stage_layers writes it.
std::string split_text(const std::vector<int>& counts);

}  // namespace trident::pipeline
