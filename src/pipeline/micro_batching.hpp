// The micro-batch count of a running job (issue 18, item 4; seed §4.1). A replica's S sequences
// per step go through the pipeline as m micro-batches of b = S/m sequences; with p stages a step
// takes about
//
//   T(m) = (m + (p − 1)/v) · t(b),    t(b) = α + β·b     (t: the slowest stage's forward + backward)
//
// — the fill-and-drain bubble, (p − 1)/(v·m + p − 1) of the step with v model chunks a stage
// (the interleaved schedule; v = 1 otherwise, and then m counts a multiple of p), against the fixed cost α that
// every micro-batch pays (a launch of every kernel, a message at each stage boundary) and that
// more, smaller micro-batches pay more often. Two rules choose m (balance.micro_batches):
//   seed:  §4.1's pseudo-code as written — when max/min of the stage times exceeds the
//          threshold, N = ceil(max / median) micro-batches (rounded up to a count dividing S);
//   model: α and β fitted to the times measured at two or more sizes (the first measurement's
//          size and one probe), and the count of least predicted T(m) among those that divide S,
//          fit in memory and lie at most one size beyond the sizes measured.
// Pure arithmetic, the same on every rank; the trainer measures, agrees on memory and applies.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pipeline/balance.hpp"

namespace trident::pipeline {

// The counts m that divide `sequences` (each micro-batch S/m sequences), ascending.
std::vector<int> micro_batch_counts(int64_t sequences);

// Seed §4.1 as written: ceil(max / median) of the stages' forward + backward per micro-batch
// (the median of an even count: the mean of the middle two). At least 1.
int seed_micro_batches(const BalanceFigures& figures);

// The slowest stage's forward + backward per micro-batch (ms) at each micro-batch size measured
// (the newest measurement per size), and the least-squares line t(b) = α + β·b through them.
class MicroBatchCost {
 public:
  void observe(int micro_batch, double ms) { points_[micro_batch] = ms; }
  void clear() { points_.clear(); }
  bool fitted() const { return points_.size() >= 2; }
  // α (ms) and β (ms per sequence), neither below 0: a measured line falling with b (noise
  // at nearly equal sizes) means no fixed cost, all of it per sequence, or the reverse.
  double alpha() const;
  double beta() const;
  double per_micro_batch_ms(int micro_batch) const { return alpha() + beta() * micro_batch; }
  const std::map<int, double>& points() const { return points_; }

 private:
  void fit(double* alpha, double* beta) const;
  std::map<int, double> points_;  // micro-batch size -> ms
};

// T(m) in ms: (m + (p − 1)/v) · t(S/m), v = chunks.
double predicted_pipeline_ms(const MicroBatchCost& cost, int count, int stages, int64_t sequences, int chunks = 1);

// The count to probe when only one size has been measured: the neighbouring count towards
// smaller micro-batches when there are several stages (a smaller bubble) and the micro-batch
// can shrink, else towards larger ones; among `allowed` (counts that fit in memory). 0: none.
int probe_count(int current, int stages, const std::vector<int>& allowed);

// balance.micro_batches = seed: the seed's N rounded up to the nearest allowed count (the
// largest allowed when N exceeds them all). Decision::counts = {m}; a move when the stages are
// imbalanced (max/min above `threshold`) and m differs from `current`.
Decision decide_seed_count(const BalanceFigures& figures, int current, const std::vector<int>& allowed, double threshold);

// balance.micro_batches = model (cost fitted): the allowed count of least predicted T(m) among
// those whose micro-batch size lies within the measured sizes or one allowed size beyond them;
// a move when it predicts the step's pipeline part faster than `current`'s by more than `margin`.
Decision decide_model_count(const MicroBatchCost& cost, int current, int stages, int64_t sequences,
                            const std::vector<int>& allowed, double margin, int chunks = 1);

}  // namespace trident::pipeline
