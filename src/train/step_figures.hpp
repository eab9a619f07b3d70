// The figures every rank measures in a step — compute and waiting times, bytes sent per kind
// of traffic and per cluster level, tracked memory — as one named record; gathered to rank 0,
// which writes the maximum over all ranks (and, with pipeline stages, over each stage's ranks)
// into metrics.h5, keeps the run's totals, and measures the pipeline bubble from them.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "comm/traffic.hpp"
#include "kernels/backend.hpp"
#include "layout/grid.hpp"
#include "metrics/metrics_file.hpp"
#include "pipeline/timeline.hpp"
#include "tensor/buffer.hpp"
#include "train/run_collectives.hpp"
#include "train/step_result.hpp"

namespace trident {

constexpr int kTrafficKinds = static_cast<int>(comm::Traffic::Count);
constexpr int kMemoryCategories = static_cast<int>(MemoryCategory::Count);

struct RankFigures {
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  double weights_ms = 0;  // of backward_ms: a zero-bubble schedule's W passes
  double comm_exposed_ms = 0, comm_ms = 0;   // data-parallel reduction: exposed, and all of it
  double tensor_exposed_ms = 0;              // tensor-parallel communication the host waited for (CPU)
  double pipeline_wait_ms = 0, schedule_ms = 0;
  std::array<double, kTrafficKinds> bytes{};  // sent, per kind of traffic (comm/traffic.hpp)
  // Sent by the data, tensor and pipeline groups at each level (node, rack, cross-rack).
  std::array<double, 3> data_bytes{}, tensor_bytes{}, pipeline_bytes{};
  std::array<double, kMemoryCategories> memory{}, memory_peak{};  // tracked bytes per category
  // The most buffers alive at once, and the peak of their bytes at a GPU's allocation granularity
  // (MemoryUsage): what the same buffers take as cudaMalloc's pages. Not named *_peak_bytes, which
  // readers sum as the categories (scripts/sweep).
  double buffers_peak = 0, granular_peak = 0;
  // The kernels' stream-ordered scratch at its peak (kernels::Backend::stream_scratch_peak: a
  // GPU's cuDNN workspace and the like, outside the tracked buffers and the memory model; 0 on
  // the CPU).
  double stream_scratch_peak = 0;

  // Calls visit(name, value) for every figure, in one fixed order, with its metrics.h5 name:
  // the one place that orders, names and (by the same walk) serialises the record.
  void for_each(const std::function<void(const std::string&, double&)>& visit);
  // The record as doubles in that order (what is gathered), and back.
  std::vector<double> values() const;
  static RankFigures from_values(const double* values);
};

// Rank 0's side of the figures over the run: per step into metrics.h5, and the totals the
// end-of-run summary prints.
class StepFigureLog {
 public:
  StepFigureLog(const layout::Grid& grid, int pp_size, const kernels::Backend& backend)
      : grid_(grid), backend_(backend), bubble_busy_(pp_size), bubble_wait_(pp_size), pass_ms_(pp_size, pipeline::PassTimes{0, 0, 0}) {}
  // Collective over all ranks: this rank's figures of the step (and the traffic counters since
  // the last call), to rank 0, which appends them to `metrics` (null on other ranks).
  void record(const StepResult& result, RunCollectives& collectives, metrics::MetricsFile* metrics);
  // The first step warms up (primitive creation, first touches): its bubble is not counted.
  void forget_bubble();
  // The summary lines: traffic per level and peak memory of the busiest rank; the bubble
  // measured beside the schedule's (pipeline::bubble_fraction, from the measured pass times)
  // with m micro-batches.
  std::vector<std::string> summary(int64_t micro_batches, pipeline::Schedule schedule, int chunks) const;

 private:
  RankFigures measure(const StepResult& result, RunCollectives& collectives);
  void record_bubble(const std::vector<RankFigures>& stage_max, metrics::MetricsFile& metrics);

  const layout::Grid& grid_;
  const kernels::Backend& backend_;  // the model's: its stream-ordered scratch
  std::vector<double> bubble_busy_, bubble_wait_;        // per stage, summed over steps
  std::vector<pipeline::PassTimes> pass_ms_;              // per stage: F, B, W summed over steps
  std::array<double, 3> level_totals_{};                  // bytes per level over the run
  std::array<double, kMemoryCategories> memory_peaks_{};  // the run's maxima
  double stream_scratch_peak_ = 0;                        // the busiest rank's
  std::array<comm::LevelBytes, 3> last_group_bytes_{};    // data, tensor, pipeline: at the last step
};

}  // namespace trident
