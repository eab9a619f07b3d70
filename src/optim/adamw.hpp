// AdamW over the model's flat parameter buffer, with weight decay on 2-D weights only (the
// embeddings and the per-block matrices; not biases or LayerNorm parameters), the learning-rate
// schedule, and global-norm gradient clipping.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/buffer.hpp"

namespace trident::optim {

struct AdamWSettings {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

// The fp32 master weights: an fp32 model's parameters are their own, updated in place; a bf16 or
// fp16 model holds 16-bit parameters only, and the optimizer keeps the fp32 master of its shard
// — with ZeRO the data group's shards together hold one master copy (Megatron-Core's distributed
// optimizer) — updating it and writing its 16-bit rounding into the model's parameters.
class AdamW {
 public:
  // Updates the parameters [shard_begin, shard_end) of the flat buffer (all of them by
  // default); the moments (and, for a 16-bit `precision`, the master) exist for that range only.
  // slice: this rank's tensor-parallel slice (the layout of its parameter buffer).
  // The state lives on `device`'s backend, with the parameters.
  AdamW(const kernels::Context& device, const model::GptConfig& config, const AdamWSettings& settings,
        const model::Partition& slice = {}, int64_t shard_begin = 0, int64_t shard_end = -1,
        kernels::Precision precision = kernels::Precision::fp32);
  // One update with learning rate lr; t counts updates from 1; the gradients are used times
  // grad_scale (the clipping factor). params: the model's parameters (Transformer::parameters_to_write),
  // f32 (updated in place) or 16-bit (the shard's part written from the updated master).
  // control (f64 (2), or empty): the gradients' factor and the skip flag, decided on the device
  // (kernels::step_control) and read there in place of grad_scale.
  void step(kernels::Context& ctx, const Tensor& params, const float* grads, float lr, int64_t t,
            float grad_scale = 1.0f, const Tensor& control = Tensor{});
  // The moments of the shard, m()[i - shard_begin] (written by a checkpoint restore).
  const float* m() const { return m_.data(); }
  const float* v() const { return v_.data(); }
  float* m() { return m_.data(); }
  float* v() { return v_.data(); }
  // A 16-bit model's fp32 master of the shard, master()[i - shard_begin] (null for fp32).
  bool keeps_master() const { return master_.size() > 0; }
  float* master() { return master_.data(); }
  // The master set from the whole slice's fp32 values in host memory (its shard's part of them).
  void load_master(kernels::Context& ctx, const float* host_slice);
  // The shard's part of the 16-bit params written from the master (after load_master or a
  // checkpoint read into master()).
  void write_master_into(kernels::Context& ctx, const Tensor& params);
  int64_t shard_begin() const { return shard_begin_; }
  int64_t shard_size() const { return static_cast<int64_t>(m_.size()); }

 private:
  AdamWSettings settings_;
  int64_t shard_begin_ = 0;
  std::vector<kernels::AdamWSegment> segments_;  // one per parameter tensor, clipped to the shard, from its start
  Buffer<float> m_, v_;
  Buffer<float> master_;  // (shard) 16-bit models only
};

// Linear warm-up over warmup_steps (lr · (step+1)/warmup), then cosine decay from lr to min_lr
// at the last step. step counts from 0.
float learning_rate(int64_t step, int64_t total_steps, int64_t warmup_steps, float lr, float min_lr);

// The global L2 norm of the gradients, and the factor that clips it to `clip` (clip / norm when
// clip > 0 and the norm exceeds it, else 1), to be applied by AdamW::step.
struct GradNorm {
  float norm = 0, clip_factor = 1;
};
GradNorm grad_norm(kernels::Context& ctx, const float* grads, int64_t n, float clip);

}  // namespace trident::optim
