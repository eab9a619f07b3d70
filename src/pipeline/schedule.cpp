// Pipeline schedules and the split of blocks over stages.
#include "pipeline/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace trident::pipeline {

Schedule parse_schedule(const std::string& name) {
  if (name == "1f1b") return Schedule::OneFOneB;
  if (name == "gpipe") return Schedule::GPipe;
  throw std::invalid_argument("unknown pipeline schedule '" + name + "'");
}

std::vector<Action> stage_actions(Schedule schedule, int stage, int stages, int micro_batches) {
  std::vector<Action> actions;
  if (schedule == Schedule::GPipe) {
    for (int i = 0; i < micro_batches; ++i) actions.push_back({true, i});
    for (int i = 0; i < micro_batches; ++i) actions.push_back({false, i});
    return actions;
  }
  const int warmup = std::min(stages - stage - 1, micro_batches);
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) actions.push_back({true, next_forward});
  while (next_forward < micro_batches) {
    actions.push_back({true, next_forward++});
    actions.push_back({false, next_backward++});
  }
  while (next_backward < micro_batches) actions.push_back({false, next_backward++});
  return actions;
}

int slots_needed(Schedule schedule, int stage, int stages, int micro_batches) {
  if (schedule == Schedule::GPipe) return micro_batches;
  return std::max(1, std::min(micro_batches, stages - stage));
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

}  // namespace trident::pipeline
