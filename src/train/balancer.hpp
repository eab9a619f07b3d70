// Load balancing of a running job (issue 18): after each step, this rank's times into the
// measurement (train/balance_monitor.hpp); at each measurement, the decisions taken from it —
// the replicas' shares of the global batch (balance.replicas), the pipeline's blocks per stage
// (balance.pipeline), the micro-batch count (balance.micro_batches) — each through its
// hysteresis. The Balancer owns that state: the monitor, the three hystereses, the micro-batch
// cost model, the warm-up step that is not measured. What it decides, the trainer applies
// through BalanceTarget, since a move rebuilds the trainer's model and runner; every rank holds
// the same figures and decides the same, so the moves need no further agreement.
//
// In a checkpoint, the balancer's section is the batching it chose (ckpt::BalanceState): saved
// from the run's layout, and adopted again on resume where the new run's layout allows
// (ckpt/stateful.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/stateful.hpp"
#include "comm/communicator.hpp"
#include "job/settings.hpp"
#include "layout/grid.hpp"
#include "metrics/metrics_file.hpp"
#include "pipeline/balance.hpp"
#include "pipeline/micro_batching.hpp"
#include "train/balance_monitor.hpp"

namespace trident {

// The batching of a run, as the balancer reads it and changes it.
struct BatchLayout {
  std::vector<int> split;           // blocks per virtual stage u = chunk·stages + stage (v = 1: per stage)
  int micro_batch = 0;            // sequences per micro-batch (B)
  int64_t micro_batches = 0;      // micro-batches per step of a replica with equal shares
  std::vector<int> shares;        // micro-batches per step of each data replica
};

// What the trainer lets the balancer read and do.
class BalanceTarget {
 public:
  virtual ~BalanceTarget() = default;
  virtual BatchLayout batch_layout() const = 0;
  // Collective: the micro-batch counts that divide `sequences` per replica, that the schedule
  // runs (interleaved: multiples of the stages) and that fit in memory on every rank.
  virtual std::vector<int> allowed_micro_batch_counts(int64_t sequences) = 0;
  // Collective: why the split `split` (BatchLayout's) with micro-batches of `micro_batch` sequences would
  // not fit on some rank; "" when they fit everywhere.
  virtual std::string memory_shortfall_anywhere(const std::vector<int>& split, int micro_batch,
                                                int64_t micro_batches) = 0;
  // From the next step on: the replicas' shares; `count` micro-batches of the same sequences a
  // replica (equal shares); the blocks moved to `split` — collective, false when the state could
  // not be moved (nothing changed).
  virtual void apply_shares(const std::vector<int>& shares) = 0;
  virtual void apply_micro_batches(int count) = 0;
  virtual bool move_blocks(const std::vector<int>& split, int64_t completed) = 0;
  // Before a checkpoint's state is read: the model built for `split`, nothing of it kept.
  virtual void build_for_split(const std::vector<int>& split) = 0;
};

class Balancer final : public ckpt::Stateful {
 public:
  // chunks: model chunks per stage (parallel.virtual_stages; a move keeps them).
  Balancer(const BalanceSettings& settings, const layout::Grid& grid, int chunks, BalanceTarget& target);

  // The run starts (or resumes) after step `step`: its first step warms up and is not measured.
  void start(int64_t step) { warm_step_ = step; }
  // After step `completed` (1-based): its times into the measurement — collective over `world`
  // (every rank, under the watchdog) — and at a measurement, the decisions and their moves.
  // metrics: rank 0's metrics.h5 (null elsewhere).
  void after_step(int64_t completed, const pipeline::StepTimes& times, int64_t micro_batches,
                  comm::Communicator& world, metrics::MetricsFile* metrics);

  // The balancer's section of a checkpoint (ckpt::BalanceState): the split, micro-batch size
  // and shares in effect.
  void save(ckpt::Metadata& checkpoint) const override;
  // Collective, on resume, before the checkpoint's state is read: the split (balance.pipeline),
  // the micro-batch size (balance.micro_batches) and the shares (balance.replicas) a checkpoint
  // recorded, adopted where this run's layout allows them.
  void restore(const ckpt::Metadata& checkpoint, const std::string& path) override;

 private:
  void decide_micro_batches(int64_t completed, const pipeline::BalanceFigures& measured, bool moved,
                            metrics::MetricsFile* metrics);
  void micro_batches_now(int count, int64_t completed);  // the target's, and what it resets here
  void shares_now(const std::vector<int>& shares, int64_t completed);

  const BalanceSettings settings_;
  const int data_, stages_, chunks_;  // replicas, pipeline stages, model chunks per stage
  BalanceTarget& target_;
  BalanceMonitor monitor_;
  int64_t warm_step_ = 0;  // a step that warms up (the first, the first after a move): not measured
  pipeline::Hysteresis split_hysteresis_, share_hysteresis_, count_hysteresis_;
  pipeline::MicroBatchCost micro_batch_cost_;  // balance.micro_batches = model: t(b) measured
  bool report_next_count_ = false;             // a probe was made: print the next count decision
};

}  // namespace trident
