// The memory model, buffer by buffer.
#include "plan/memory_model.hpp"

#include <algorithm>

#include "comm/buckets.hpp"
#include "model/params.hpp"
#include "pipeline/schedule.hpp"

namespace trident::plan {
namespace {

constexpr int64_t kFloat = sizeof(float);

int index(MemoryCategory c) { return static_cast<int>(c); }

// Floats of one block's kept activations (model/gpt2.cpp allocate_layer), and of its output.
int64_t layer_floats(const MemoryInputs& in, bool attention_kept) {
  const int64_t BT = int64_t(in.micro_batch) * in.seq_len, C = in.config.channels, Cl = C / in.tensor;
  const int64_t probs = int64_t(in.micro_batch) * (in.config.heads / in.tensor) * in.seq_len * in.seq_len;
  return 4 * BT * C + 4 * BT + 3 * BT * Cl + BT * Cl + 8 * BT * Cl + (attention_kept ? probs : 0);
}

int64_t activation_floats(const MemoryInputs& in, int stage) {
  const int64_t BT = int64_t(in.micro_batch) * in.seq_len, C = in.config.channels, Cl = C / in.tensor;
  const int64_t probs = int64_t(in.micro_batch) * (in.config.heads / in.tensor) * in.seq_len * in.seq_len;
  const int L = in.stage_layers[stage];
  const bool selective = in.recompute == "selective";
  const int K = in.recompute == "full" ? 1 : in.recompute == "every_k" ? in.recompute_interval : 0;
  int64_t slot = BT * C;  // stage input
  if (K == 0) {
    slot += L * layer_floats(in, !selective);
  } else {
    for (int l = 0; l < L; ++l)
      if ((l + 1) % K == 0 || l == L - 1) slot += BT * C;  // segment-ending outputs
  }
  if (stage == in.pipeline - 1)  // final LayerNorm, logits of this rank's vocabulary rows, losses
    slot += BT * C + 2 * BT + BT * (in.config.padded_vocab / in.tensor) + 2 * BT;
  const int slots = pipeline::slots_needed(in.gpipe ? pipeline::Schedule::GPipe : pipeline::Schedule::OneFOneB, stage,
                                           in.pipeline, in.micro_batches);
  int64_t shared = K * layer_floats(in, true) + (selective ? probs : 0);
  shared += 3 * BT + BT * C + 2 * BT * C + BT * Cl + 3 * BT * Cl + 8 * BT * Cl + probs;  // backward scratch
  return slots * slot + shared;
}

}  // namespace

int64_t MemoryEstimate::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

int64_t block_activation_bytes(const MemoryInputs& in) { return layer_floats(in, true) * kFloat; }

MemoryEstimate estimate_stage(const MemoryInputs& in, int stage) {
  MemoryEstimate e;
  const model::Partition part = model::stage_partition(in.stage_layers, stage, 0, in.tensor);
  const int64_t n = model::num_parameters(in.config, part);
  const int64_t shard = in.zero ? (n + in.data - 1) / in.data : n;  // the largest ZeRO-1 shard
  e.bytes[index(MemoryCategory::Parameters)] = n * kFloat;
  e.bytes[index(MemoryCategory::Gradients)] = n * kFloat;
  e.bytes[index(MemoryCategory::OptimizerState)] = 2 * shard * kFloat;
  e.bytes[index(MemoryCategory::Activations)] = activation_floats(in, stage) * kFloat;
  if (in.data > 1 && !in.zero) {  // the reducer's packing buffer: the largest bucket
    int64_t largest = 0;
    for (const comm::Bucket& b : comm::plan_buckets(in.config, part, in.bucket_mb)) largest = std::max(largest, b.elements);
    e.bytes[index(MemoryCategory::Communication)] = largest * kFloat;
  }
  if (in.async_checkpoint)  // staging copies of replica 0: parameters and its moments
    e.bytes[index(MemoryCategory::Checkpoint)] = (n + 2 * shard) * kFloat;
  return e;
}

MemoryEstimate estimate_busiest(const MemoryInputs& in, int64_t* busiest_total) {
  MemoryEstimate busiest;
  int64_t total = 0;
  for (int stage = 0; stage < in.pipeline; ++stage) {
    const MemoryEstimate e = estimate_stage(in, stage);
    for (int c = 0; c < kCategories; ++c) busiest.bytes[c] = std::max(busiest.bytes[c], e.bytes[c]);
    total = std::max(total, e.total());
  }
  if (busiest_total) *busiest_total = total;
  return busiest;
}

}  // namespace trident::plan
