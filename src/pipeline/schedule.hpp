// Pipeline schedules: the order in which one stage runs the forward and backward passes of a
// step's micro-batches, and how the stages' blocks are split.
//   GPipe: every forward, then every backward (m micro-batches held at once).
//   1F1B: stage s first runs min(p − s − 1, m) forwards (warm-up), then alternates one forward
//         and one backward, then runs the remaining backwards (cool-down): at most p − s
//         micro-batches held at once, the same bubble (p − 1)/(m + p − 1) as GPipe.
// Both run each stage's backwards in micro-batch order, so the last action of every stage is
// the backward of micro-batch m − 1 — where the gradients become final.
#pragma once

#include <string>
#include <vector>

namespace trident::pipeline {

enum class Schedule { OneFOneB, GPipe };
Schedule parse_schedule(const std::string& name);  // "1f1b" | "gpipe"

struct Action {
  bool forward;     // else backward
  int micro_batch;  // 0 … m−1
};

std::vector<Action> stage_actions(Schedule schedule, int stage, int stages, int micro_batches);

// Micro-batches a stage holds at once under the schedule (activation slots); micro-batch i
// uses slot i mod slots.
int slots_needed(Schedule schedule, int stage, int stages, int micro_batches);

// Blocks per stage: parallel.stage_layers when given, else an even split whose remainder goes to
// the middle stages first (the first and last stage also carry the embedding and the head).
std::vector<int> stage_layer_counts(int layers, int stages, const std::vector<long>& given);

}  // namespace trident::pipeline
