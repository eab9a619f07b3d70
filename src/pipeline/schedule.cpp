// Pipeline schedules and the split of blocks over stages.
#include "pipeline/schedule.hpp"

#include "pipeline/timeline.hpp"

#include <algorithm>
#include <stdexcept>

namespace trident::pipeline {

Schedule parse_schedule(const std::string& name) {
  if (name == "1f1b") return Schedule::OneFOneB;
  if (name == "gpipe") return Schedule::GPipe;
  if (name == "zb-h1") return Schedule::ZeroBubbleH1;
  throw std::invalid_argument("unknown pipeline schedule '" + name + "'");
}

std::string schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::OneFOneB: return "1f1b";
    case Schedule::GPipe: return "gpipe";
    case Schedule::ZeroBubbleH1: return "zb-h1";
  }
  return "?";
}

bool splits_backward(Schedule schedule) { return schedule == Schedule::ZeroBubbleH1; }

namespace {

std::vector<Action> gpipe(int micro_batches) {
  std::vector<Action> actions;
  actions.reserve(2 * size_t(micro_batches));
  for (int i = 0; i < micro_batches; ++i) actions.push_back({Pass::Forward, i});
  for (int i = 0; i < micro_batches; ++i) actions.push_back({Pass::Backward, i});
  return actions;
}

// 1F1B's order of forwards and backwards; with `split`, each backward is B, and W's follow as
// ZB-H1 places them (the header).
std::vector<Action> one_f_one_b(int stage, int stages, int micro_batches, bool split) {
  std::vector<Action> actions;
  actions.reserve((split ? 3 : 2) * size_t(micro_batches));
  int next_forward = 0, next_backward = 0, next_weights = 0;
  auto backward = [&] {
    if (!split) return actions.push_back({Pass::Backward, next_backward++});
    actions.push_back({Pass::InputGradient, next_backward++});
    if (next_backward >= stage + 1) actions.push_back({Pass::WeightGradient, next_weights++});
  };
  const int warmup = std::min(stages - stage - 1, micro_batches);
  for (; next_forward < warmup; ++next_forward) actions.push_back({Pass::Forward, next_forward});
  while (next_forward < micro_batches) {
    actions.push_back({Pass::Forward, next_forward++});
    backward();
  }
  while (next_backward < micro_batches) backward();
  if (split)
    while (next_weights < micro_batches) actions.push_back({Pass::WeightGradient, next_weights++});
  return actions;
}

// Megatron-LM's interleaved order (the header).
std::vector<Action> interleaved(int stage, int stages, int micro_batches, int chunks) {
  const int group = stages * chunks, total = micro_batches * chunks;
  auto nth = [&](int k, Pass pass) {
    const int chunk = k % group / stages, micro_batch = k / group * stages + k % stages;
    return Action{pass, micro_batch, pass == Pass::Forward ? chunk : chunks - 1 - chunk};
  };
  const int warmup = std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  std::vector<Action> actions;
  actions.reserve(2 * size_t(total));
  for (int k = 0; k < warmup; ++k) actions.push_back(nth(k, Pass::Forward));
  for (int k = 0; k < total - warmup; ++k) {
    actions.push_back(nth(warmup + k, Pass::Forward));
    actions.push_back(nth(k, Pass::Backward));
  }
  for (int k = std::max(0, total - warmup); k < total; ++k) actions.push_back(nth(k, Pass::Backward));
  return actions;
}

}  // namespace

std::vector<Action> stage_actions(Schedule schedule, int stage, int stages, int micro_batches, int chunks) {
  if (chunks > 1) {
    if (schedule != Schedule::OneFOneB)
      throw std::invalid_argument(schedule_name(schedule) + " has no interleaved form: virtual stages need 1f1b");
    if (micro_batches % stages != 0)
      throw std::invalid_argument("the interleaved schedule needs the micro-batches (" + std::to_string(micro_batches) +
                                  ") a multiple of the stages (" + std::to_string(stages) + ")");
    return interleaved(stage, stages, micro_batches, chunks);
  }
  if (schedule == Schedule::GPipe) return gpipe(micro_batches);
  return one_f_one_b(stage, stages, micro_batches, splits_backward(schedule));
}

std::vector<int> chunk_slots(Schedule schedule, int stage, int stages, int micro_batches, int chunks) {
  std::vector<int> held(chunks, 0), most(chunks, 1);
  for (const Action& a : stage_actions(schedule, stage, stages, micro_batches, chunks)) {
    if (a.pass == Pass::Forward) most[a.chunk] = std::max(most[a.chunk], ++held[a.chunk]);
    else if (a.pass != Pass::InputGradient) --held[a.chunk];  // held until its last backward pass
  }
  return most;
}

int slots_needed(Schedule schedule, int stage, int stages, int micro_batches) {
  return chunk_slots(schedule, stage, stages, micro_batches)[0];
}

double bubble_fraction(Schedule schedule, int stages, int micro_batches, double f, double b, double w, int chunks) {
  const double p = stages, m = micro_batches, work = m * (f + b + w);
  if (stages <= 1) return 0.0;
  if (schedule != Schedule::ZeroBubbleH1) return (p - 1) / (chunks * m + p - 1);
  if (work <= 0) return bubble_fraction(schedule, stages, micro_batches, 1, 1, 1);  // no times: equal ones
  if (w > std::min(f, b))  // no closed form: the timeline itself
    return implied_bubble(schedule, micro_batches, std::vector<PassTimes>(stages, PassTimes{f, b, w}));
  const double idle = (p - 1) * (f + b - w);
  return idle / (work + idle);
}

std::vector<int> stage_layer_counts(int layers, int stages, const std::vector<long>& given) {
  if (!given.empty()) return std::vector<int>(given.begin(), given.end());
  std::vector<int> counts(stages, layers / stages);
  std::vector<int> order;  // middle stages first, then the first, then the last
  for (int s = 1; s < stages - 1; ++s) order.push_back(s);
  order.push_back(0);
  if (stages > 1) order.push_back(stages - 1);
  for (int extra = 0; extra < layers % stages; ++extra) ++counts[order[extra]];
  return counts;
}

std::vector<int> stage_totals(const std::vector<int>& virtual_layers, int stages) {
  std::vector<int> totals(stages, 0);
  for (size_t u = 0; u < virtual_layers.size(); ++u) totals[u % stages] += virtual_layers[u];
  return totals;
}

}  // namespace trident::pipeline
