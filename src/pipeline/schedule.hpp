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
//   Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's order): 1F1B with v model chunks per
//         stage (parallel.virtual_stages), stage s holding virtual stages s, s + p, …, s + (v − 1)p
//         of the v·p (of any sizes), each F and B one chunk's. The k-th forward of a stage (k = 0 … v·m − 1)
//         is chunk (k mod p·v) div p of micro-batch (k div p·v)·p + k mod p — p micro-batches
//         through one chunk, then the same p through the next —, the k-th backward the same with
//         the chunks in reverse; min((p − s − 1)·2 + (v − 1)·p, v·m) forwards of warm-up, then
//         alternating, then the remaining backwards. m a multiple of p. Bubble
//         (p − 1)/(v·m + p − 1), at the cost of v times the point-to-point messages.
// Every schedule runs each stage's backwards (and W's) of one chunk in micro-batch order, so the
// last action of a chunk's micro-batch m − 1 is its backward or W — where that chunk's weight
// gradients become final — and gradients accumulate over micro-batches in the same order under
// every schedule.
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
  int chunk = 0;    // the stage's model chunk (interleaved: 0 … v−1; else 0)
};

// chunks: v model chunks per stage (1F1B only; std::invalid_argument for another schedule, or
// for m not a multiple of p with v > 1).
std::vector<Action> stage_actions(Schedule schedule, int stage, int stages, int micro_batches, int chunks = 1);

// Micro-batches a stage holds at once in each of its chunks (activation slots per chunk): the
// most whose F has run and whose backward (or W) has not, over its action list. Micro-batch i of
// chunk c uses the chunk's slot i mod chunk_slots[c].
std::vector<int> chunk_slots(Schedule schedule, int stage, int stages, int micro_batches, int chunks = 1);
// Without chunks: its one chunk's.
int slots_needed(Schedule schedule, int stage, int stages, int micro_batches);

// The idle fraction of a stage's step, 1 − m·(f + b + w) / span, when every stage's passes take
// f (forward), b (input gradient) and w (weight gradient) seconds and transfers take none:
// GPipe and 1F1B (p − 1)/(m + p − 1); ZB-H1, where w ≤ min(f, b) (a transformer's: w is the
// weight half of the GEMMs' backward, b the other half and the attention's), (p − 1)(f + b − w)
// idle over a span of m(f + b + w) + (p − 1)(f + b − w) — exactly the timeline's
// (tests/unit/test_schedule.cpp); where w is larger, the timeline itself (pipeline/timeline.hpp);
// without times (all 0), equal ones.
// Interleaved (chunks v > 1; f, b, w the whole stage's): (p − 1)/(v·m + p − 1).
double bubble_fraction(Schedule schedule, int stages, int micro_batches, double f, double b, double w,
                       int chunks = 1);

// Blocks per stage: parallel.stage_layers when given, else an even split whose remainder goes to
// the middle stages first (the first and last stage also carry the embedding and the head).
std::vector<int> stage_layer_counts(int layers, int stages, const std::vector<long>& given);
// Interleaved: each stage's blocks, the sum of its chunks' (virtual_layers: blocks per virtual
// stage u = chunk·stages + stage).
std::vector<int> stage_totals(const std::vector<int>& virtual_layers, int stages);

}  // namespace trident::pipeline
