// Measuring the load balance of a running job (issue 18, item 1): every balance.interval steps,
// each rank's forward and backward time per micro-batch (and its embedding/head part) — the
// median over the interval's steps, so that a step where another process took the core does
// not count — is gathered by every rank, summarised per stage and per data replica (the slowest
// rank of each), written into metrics.h5 (balance/*) and printed when max/min exceeds
// balance.threshold. Every rank holds the same figures, so decisions taken from them need no
// further agreement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "job/settings.hpp"
#include "layout/grid.hpp"
#include "metrics/metrics_file.hpp"
#include "pipeline/balance.hpp"
#include "pipeline/runner.hpp"

namespace trident {

class BalanceMonitor {
 public:
  BalanceMonitor(const BalanceSettings& settings, const layout::Grid& grid) : settings_(settings), grid_(grid) {}
  // This rank's times of a step of `micro_batches` micro-batches (a warm-up step: zero times of
  // zero micro-batches, so that it still takes part in the collective). At the end of every
  // balance.interval-th step (`completed`, 1-based) — collective over all ranks (world, under
  // the watchdog) — returns the interval's figures, the same on every rank.
  std::optional<pipeline::BalanceFigures> add_step(const pipeline::StepTimes& times, int64_t micro_batches,
                                                   int64_t completed, comm::Communicator& world);
  // Rank 0 (metrics non-null): the figures into metrics.h5 and, when imbalanced, the console.
  void record(int64_t completed, const pipeline::BalanceFigures& figures, metrics::MetricsFile* metrics) const;
  // "stages 12.1, 24.3 ms (max/min 2.01); replicas …" — the figures of a measurement in one line.
  static std::string describe(const pipeline::BalanceFigures& figures);

 private:
  const BalanceSettings settings_;
  const layout::Grid grid_;
  // Per step of the interval so far: forward, backward and edge ms per micro-batch.
  std::vector<double> forward_ms_, backward_ms_, edge_ms_;
};

}  // namespace trident
