// Pipeline schedules: the order in which one stage runs the passes of a step's micro-batches,
// and how the stages' blocks are split. With p stages and m micro-batches:
//   GPipe: every forward, then every backward (m micro-batches held at once).
//   1F1B: stage s first runs min(p − s − 1, m) forwards (warm-up), then alternates one forward
//         and one backward, then runs the remaining backwards (cool-down): at most p − s
//         micro-batches held at once, the same bubble (p − 1)/(m + p − 1) as GPipe.
//   ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", their handcrafted H1): the
//         backward split into B, the input gradient the previous stage waits for, and W, the
//         weight gradient nothing waits for. F and B run in 1F1B's order; stage s runs its first
//         W after its (s + 1)-th B and then one W after every B, the W's left at the end after
//         the last B. The deferred W's fill what is 1F1B's cool-down bubble: with equal pass
//         times the bubble is (p − 1)(F + B − W) per stage instead of (p − 1)(F + B + W). A
//         micro-batch is held from its F to its W: min(p, m) on every stage — 1F1B's peak (stage
//         0's), now on every stage.
// Every schedule runs each stage's backwards (and W's) in micro-batch order, so the last action
// of every stage is micro-batch m − 1's backward or W — where the weight gradients become final
// — and gradients accumulate over micro-batches in the same order under every schedule.
#pragma once

#include <string>
#include <vector>

namespace trident::pipeline {

enum class Schedule { OneFOneB, GPipe, ZeroBubbleH1 };
Schedule parse_schedule(const std::string& name);  // "1f1b" | "gpipe" | "zb-h1"
std::string schedule_name(Schedule schedule);
// The schedule runs the backward as two passes, B and W.
bool splits_backward(Schedule schedule);

enum class Pass {
  Forward,
  Backward,        // the whole backward: input and weight gradients
  InputGradient,   // B: the input gradient (and the gradients of the non-GEMM parameters)
  WeightGradient,  // W: the blocks' GEMM weight gradients
};

struct Action {
  Pass pass;
  int micro_batch;  // 0 … m−1
};

std::vector<Action> stage_actions(Schedule schedule, int stage, int stages, int micro_batches);

// Micro-batches a stage holds at once under the schedule (activation slots); micro-batch i
// uses slot i mod slots.
int slots_needed(Schedule schedule, int stage, int stages, int micro_batches);

// The idle fraction of a stage's step, 1 − m·(f + b + w) / span, when every stage's passes take
// f (forward), b (input gradient) and w (weight gradient) seconds and transfers take none:
// GPipe and 1F1B (p − 1)/(m + p − 1); ZB-H1, where w ≤ min(f, b) (a transformer's: w is the
// weight half of the GEMMs' backward, b the other half and the attention's), (p − 1)(f + b − w)
// idle over a span of m(f + b + w) + (p − 1)(f + b − w) — exactly the timeline's
// (tests/unit/test_schedule.cpp); where w is larger, the timeline itself (pipeline/timeline.hpp);
// without times (all 0), equal ones.
double bubble_fraction(Schedule schedule, int stages, int micro_batches, double f, double b, double w);

// Blocks per stage: parallel.stage_layers when given, else an even split whose remainder goes to
// the middle stages first (the first and last stage also carry the embedding and the head).
std::vector<int> stage_layer_counts(int layers, int stages, const std::vector<long>& given);

}  // namespace trident::pipeline
