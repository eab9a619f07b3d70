// AdamW over the model's flat parameter buffer, with weight decay on 2-D weights only (the
// embeddings and the per-block matrices; not biases or LayerNorm parameters), the learning-rate
// schedule, and global-norm gradient clipping.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/flat_ranges.hpp"
#include "model/params.hpp"
#include "tensor/buffer.hpp"

namespace trident::optim {

struct AdamWSettings {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

// The fp32 master weights: an fp32 model's parameters are their own, updated in place; a bf16 or
// fp16 model holds 16-bit parameters only, and the optimizer keeps the fp32 master of what it
// owns — with ZeRO the data group's replicas together hold one master copy (Megatron-Core's
// distributed optimizer) — updating it and writing its 16-bit rounding into the model's parameters.
class AdamW {
 public:
  // Updates the parameters of the `owned` ranges of the flat buffer (all of them by default, or
  // empty); the moments (and, for a 16-bit `precision`, the master) exist for those only, stored
  // range after range: the state. slice: this rank's tensor-parallel slice (the layout of its
  // parameter buffer). The state lives on `device`'s backend, with the parameters.
  // state_order_gradients: step()'s gradients are the owned ones alone, in the state's order
  // (ZeRO-2's and 3's, dp::GradientReducer::owned_gradients), not the flat buffer;
  // state_order_params: so are its parameters (ZeRO-3's, dp::ParameterShards::shard).
  AdamW(const kernels::Context& device, const model::GptConfig& config, const AdamWSettings& settings,
        const model::Partition& slice = {}, model::FlatRanges owned = {},
        kernels::Precision precision = kernels::Precision::fp32, bool state_order_gradients = false,
        bool state_order_params = false);
  // One update with learning rate lr; t counts updates from 1; the gradients are used times
  // grad_scale (the clipping factor). params: the model's parameters (Transformer::parameters_to_write),
  // f32 (updated in place) or 16-bit (the shard's part written from the updated master).
  // control (f64 (2), or empty): the gradients' factor and the skip flag, decided on the device
  // (kernels::step_control) and read there in place of grad_scale.
  void step(kernels::Context& ctx, const Tensor& params, const float* grads, float lr, int64_t t,
            float grad_scale = 1.0f, const Tensor& control = Tensor{});
  // The moments of the owned ranges, in state order (written by a checkpoint restore).
  const float* m() const { return m_.data(); }
  const float* v() const { return v_.data(); }
  float* m() { return m_.data(); }
  float* v() { return v_.data(); }
  // A 16-bit model's fp32 master of the owned ranges, in state order (null for fp32).
  bool keeps_master() const { return master_.size() > 0; }
  float* master() { return master_.data(); }
  // The master set from the whole slice's fp32 values in host memory (its owned part of them).
  void load_master(kernels::Context& ctx, const float* host_slice);
  // The same from the owned ranges' values alone, in state order (state_size() floats).
  void load_owned_master(kernels::Context& ctx, const float* owned_values);
  // The owned part of the 16-bit params written from the master (after load_master or a
  // checkpoint read into master()).
  void write_master_into(kernels::Context& ctx, const Tensor& params);
  const model::FlatRanges& owned() const { return owned_; }
  int64_t state_size() const { return static_cast<int64_t>(m_.size()); }

 private:
  // One owned range: where its state starts, and its parameter tensors' parts (weight decay or
  // not), numbered from the range's start.
  struct Range {
    model::FlatRange flat;
    int64_t state_begin = 0;
    std::vector<kernels::AdamWSegment> segments;
  };
  AdamWSettings settings_;
  model::FlatRanges owned_;
  bool state_order_gradients_ = false, state_order_params_ = false;
  std::vector<Range> ranges_;
  int64_t params_at(const Range& r) const;  // where a range's parameters start in step()'s params
  Buffer<float> m_, v_;
  Buffer<float> master_;  // (state) 16-bit models only
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
