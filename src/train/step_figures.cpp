// Every rank's figures of a step, gathered and recorded by rank 0.
#include "train/step_figures.hpp"

#include <algorithm>
#include <cstdio>

#include "topo/topology.hpp"

namespace trident {
namespace {

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

}  // namespace

void RankFigures::for_each(const std::function<void(const std::string&, double&)>& visit) {
  visit("forward_ms", forward_ms);
  visit("backward_ms", backward_ms);
  visit("weights_ms", weights_ms);
  visit("optimizer_ms", optimizer_ms);
  visit("comm_exposed_ms", comm_exposed_ms);
  visit("comm_ms", comm_ms);
  visit("tensor_exposed_ms", tensor_exposed_ms);
  visit("pipeline_wait_ms", pipeline_wait_ms);
  visit("schedule_ms", schedule_ms);
  for (int kind = 0; kind < kTrafficKinds; ++kind)
    visit(std::string("bytes_") + comm::traffic_name(static_cast<comm::Traffic>(kind)), bytes[kind]);
  const auto key = [](int level) { return std::string(topo::level_key(static_cast<topo::Level>(level))); };
  for (int level = 0; level < 3; ++level) visit("data_bytes_" + key(level), data_bytes[level]);
  for (int level = 0; level < 3; ++level) visit("tensor_bytes_" + key(level), tensor_bytes[level]);
  for (int level = 0; level < 3; ++level) visit("pipeline_bytes_" + key(level), pipeline_bytes[level]);
  for (int c = 0; c < kMemoryCategories; ++c)
    visit(std::string("memory/") + memory_category_name(static_cast<MemoryCategory>(c)) + "_bytes", memory[c]);
  for (int c = 0; c < kMemoryCategories; ++c)
    visit(std::string("memory/") + memory_category_name(static_cast<MemoryCategory>(c)) + "_peak_bytes",
          memory_peak[c]);
  visit("memory/buffers_peak", buffers_peak);
  visit("memory/granular_peak", granular_peak);
  visit("memory/stream_scratch_peak", stream_scratch_peak);
}

std::vector<double> RankFigures::values() const {
  RankFigures copy = *this;
  std::vector<double> flat;
  copy.for_each([&](const std::string&, double& value) { flat.push_back(value); });
  return flat;
}

RankFigures RankFigures::from_values(const double* values) {
  RankFigures figures;
  figures.for_each([&](const std::string&, double& value) { value = *values++; });
  return figures;
}

RankFigures StepFigureLog::measure(const StepResult& r, RunCollectives& collectives) {
  RankFigures f;
  f.forward_ms = r.pipeline.forward_seconds * 1e3;
  f.backward_ms = r.pipeline.backward_seconds * 1e3;
  f.weights_ms = r.pipeline.weight_seconds * 1e3;
  f.optimizer_ms = r.optimizer_seconds * 1e3;
  f.comm_exposed_ms = r.exposed_comm_seconds * 1e3;
  f.comm_ms = r.comm_seconds * 1e3;
  f.tensor_exposed_ms = r.tensor_exposed_seconds * 1e3;
  f.pipeline_wait_ms = r.pipeline.wait_seconds * 1e3;
  f.schedule_ms = r.pipeline.schedule_seconds * 1e3;
  const comm::TrafficTotals traffic = comm::take_traffic();
  std::copy(std::begin(traffic.bytes), std::end(traffic.bytes), f.bytes.begin());
  // The data, tensor and pipeline groups' bytes per level since the last step.
  const comm::Communicator* groups[] = {collectives.data.get(), collectives.tensor.get(), collectives.pipeline.get()};
  std::array<double, 3>* into[] = {&f.data_bytes, &f.tensor_bytes, &f.pipeline_bytes};
  for (int g = 0; g < 3; ++g) {
    const comm::LevelBytes now = groups[g]->traffic();
    for (int level = 0; level < 3; ++level) (*into[g])[level] = now.sent[level] - last_group_bytes_[g].sent[level];
    last_group_bytes_[g] = now;
  }
  const MemoryUsage memory = memory_usage();
  for (int c = 0; c < kMemoryCategories; ++c) {
    f.memory[c] = static_cast<double>(memory.current[c]);
    f.memory_peak[c] = static_cast<double>(memory.peak[c]);
  }
  f.buffers_peak = static_cast<double>(memory.buffers_peak);
  f.granular_peak = static_cast<double>(memory.granular_peak);
  f.stream_scratch_peak = backend_.stream_scratch_peak();
  return f;
}

void StepFigureLog::record(const StepResult& result, RunCollectives& collectives, metrics::MetricsFile* metrics) {
  const std::vector<double> mine = measure(result, collectives).values();
  const int world = grid_.world_size(), n = static_cast<int>(mine.size());
  std::vector<double> all(collectives.world->rank() == 0 ? static_cast<size_t>(world) * n : 0);
  collectives.world->gather(mine.data(), all.data(), n, DType::f64, 0, Stream{}).wait();
  if (!metrics) return;
  // The maximum of each figure over each stage's ranks, and over all of them.
  const int stages = static_cast<int>(bubble_busy_.size());
  std::vector<std::vector<double>> stage_max(stages, std::vector<double>(n, 0.0));
  std::vector<double> overall(n, 0.0);
  for (int rank = 0; rank < world; ++rank)
    for (int k = 0; k < n; ++k) {
      const double value = all[static_cast<size_t>(rank) * n + k];
      double& stage = stage_max[grid_.coord_of(rank).pp][k];
      stage = std::max(stage, value);
      overall[k] = std::max(overall[k], value);
    }
  int k = 0;
  RankFigures{}.for_each([&](const std::string& name, double&) {
    if (stages > 1)
      for (int stage = 0; stage < stages; ++stage) metrics->append("stage" + std::to_string(stage) + "/" + name, stage_max[stage][k]);
    metrics->append(name, overall[k]);
    ++k;
  });
  const RankFigures busiest = RankFigures::from_values(overall.data());
  for (int level = 0; level < 3; ++level)
    level_totals_[level] += busiest.data_bytes[level] + busiest.tensor_bytes[level] + busiest.pipeline_bytes[level];
  for (int c = 0; c < kMemoryCategories; ++c) memory_peaks_[c] = std::max(memory_peaks_[c], busiest.memory_peak[c]);
  stream_scratch_peak_ = std::max(stream_scratch_peak_, busiest.stream_scratch_peak);
  std::vector<RankFigures> per_stage;
  for (const std::vector<double>& stage : stage_max) per_stage.push_back(RankFigures::from_values(stage.data()));
  record_bubble(per_stage, *metrics);
}

// A stage is idle for the part of the pipeline phase — as long as the slowest stage's
// schedule — that it does not compute: waiting for inputs, and before and after its work.
void StepFigureLog::record_bubble(const std::vector<RankFigures>& stage_max, metrics::MetricsFile& metrics) {
  const int stages = static_cast<int>(stage_max.size());
  double phase = 0.0;
  for (const RankFigures& stage : stage_max) phase = std::max(phase, stage.schedule_ms);
  for (int stage = 0; stage < stages; ++stage) {
    const double busy = stage_max[stage].forward_ms + stage_max[stage].backward_ms;
    bubble_busy_[stage] += busy;
    pipeline::PassTimes& passes = pass_ms_[stage];
    passes.forward += stage_max[stage].forward_ms;
    passes.input_gradient += stage_max[stage].backward_ms - stage_max[stage].weights_ms;
    passes.weight_gradient += stage_max[stage].weights_ms;
    bubble_wait_[stage] += std::max(0.0, phase - busy);
    metrics.append(stages > 1 ? "stage" + std::to_string(stage) + "/bubble_ms" : "bubble_ms",
                   std::max(0.0, phase - busy));
  }
}

void StepFigureLog::forget_bubble() {
  std::fill(bubble_busy_.begin(), bubble_busy_.end(), 0.0);
  std::fill(bubble_wait_.begin(), bubble_wait_.end(), 0.0);
  std::fill(pass_ms_.begin(), pass_ms_.end(), pipeline::PassTimes{0, 0, 0});
}

std::vector<std::string> StepFigureLog::summary(int64_t micro_batches, pipeline::Schedule schedule, int chunks) const {
  std::vector<std::string> lines;
  char text[256];
  std::snprintf(text, sizeof text,
                "traffic of the busiest rank per group, whole run: node %.1f MB, rack %.1f MB, "
                "cross-rack %.1f MB (data, tensor and pipeline groups; metrics.h5 has each per step)",
                level_totals_[0] / 1e6, level_totals_[1] / 1e6, level_totals_[2] / 1e6);
  if (grid_.world_size() > 1) lines.push_back(text);
  std::string peaks = "peak tracked memory of the busiest rank:";
  for (int c = 0; c < kMemoryCategories; ++c) {
    std::snprintf(text, sizeof text, " %s %.1f MiB", memory_category_name(static_cast<MemoryCategory>(c)),
                  memory_peaks_[c] / 1048576.0);
    peaks += text;
  }
  if (stream_scratch_peak_ > 0) {
    std::snprintf(text, sizeof text, "; and the kernels' stream-ordered scratch %.1f MiB (untracked: cuDNN's "
                  "workspace and the like, outside the memory model)", stream_scratch_peak_ / 1048576.0);
    peaks += text;
  }
  lines.push_back(peaks);
  const int stages = static_cast<int>(bubble_busy_.size());
  if (stages == 1) return lines;
  double mean = 0.0;
  std::string per_stage;
  for (int stage = 0; stage < stages; ++stage) {
    const double fraction = bubble_wait_[stage] / std::max(1e-12, bubble_wait_[stage] + bubble_busy_[stage]);
    mean += fraction / stages;
    std::snprintf(text, sizeof text, "%s%.1f%%", stage ? ", " : "", 100.0 * fraction);
    per_stage += text;
  }
  // The schedule's timeline with these stages' measured pass times, and with equal stages.
  const int m = static_cast<int>(micro_batches);
  const double implied = pipeline::implied_bubble(schedule, m, pass_ms_, chunks);
  pipeline::PassTimes sum{0, 0, 0};
  for (const pipeline::PassTimes& t : pass_ms_)
    sum.forward += t.forward, sum.input_gradient += t.input_gradient, sum.weight_gradient += t.weight_gradient;
  const double equal =
      pipeline::bubble_fraction(schedule, stages, m, sum.forward, sum.input_gradient, sum.weight_gradient, chunks);
  std::snprintf(text, sizeof text, " (p = %d, m = %d%s)", stages, m,
                chunks > 1 ? (", v = " + std::to_string(chunks)).c_str() : "");
  lines.push_back("pipeline bubble: measured " + percent(mean) + " (mean of stages: " + per_stage + "); the " +
                  pipeline::schedule_name(schedule) + (chunks > 1 ? " interleaved" : "") +
                  " schedule's with these stage times " + percent(implied) +
                  ", with equal stages " + percent(equal) + text);
  return lines;
}

}  // namespace trident
