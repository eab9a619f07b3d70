// AdamW, the learning-rate schedule and gradient clipping.
#include "optim/adamw.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/backend.hpp"
#include "model/params.hpp"

namespace trident::optim {

AdamW::AdamW(const kernels::Context& device, const model::GptConfig& config, const AdamWSettings& settings,
             const model::Partition& slice, int64_t shard_begin, int64_t shard_end, kernels::Precision precision)
    : settings_(settings), shard_begin_(shard_begin) {
  if (shard_end < 0) shard_end = model::num_parameters(config, slice);
  kernels::Backend& backend = kernels::backend_of(device);
  const size_t n = static_cast<size_t>(shard_end - shard_begin);
  m_ = Buffer<float>(n, MemoryCategory::OptimizerState, backend, MemoryKind::device);
  v_ = Buffer<float>(n, MemoryCategory::OptimizerState, backend, MemoryKind::device);
  if (precision != kernels::Precision::fp32)
    master_ = Buffer<float>(n, MemoryCategory::OptimizerState, backend, MemoryKind::device);
  int64_t offset = 0;
  for (const model::ParamSpec& spec : model::param_specs(config, slice)) {
    const int64_t begin = std::max(offset, shard_begin), end = std::min(offset + spec.count(), shard_end);
    if (begin < end) segments_.push_back({begin - shard_begin, end - begin, spec.weight_decay});
    offset += spec.count();
  }
}

void AdamW::step(kernels::Context& ctx, const Tensor& params, const float* grads, float lr, int64_t t,
                 float grad_scale, const Tensor& control) {
  const Device device = m_.device();  // the parameters' and gradients' too
  const int64_t n = shard_size();
  const Tensor shard = params.elements(shard_begin_, n);
  const Tensor gradients = view(grads + shard_begin_, static_cast<size_t>(n), device);
  // fp32: the parameters are the master; 16-bit: the master is ours, its rounding written to them.
  const Tensor master = keeps_master() ? master_.view() : shard;
  const Tensor low = keeps_master() ? shard : Tensor{};
  kernels::adamw_update(ctx, master, low, gradients, m_.view(), v_.view(), segments_, lr, settings_.beta1,
                        settings_.beta2, settings_.eps, settings_.weight_decay, t, grad_scale, control);
}

void AdamW::load_master(kernels::Context& ctx, const float* host_slice) {
  if (keeps_master()) kernels::upload(ctx, master_.view(), host_slice + shard_begin_);
}

void AdamW::write_master_into(kernels::Context& ctx, const Tensor& params) {
  if (keeps_master()) kernels::convert(ctx, params.elements(shard_begin_, shard_size()), master_.view());
}

float learning_rate(int64_t step, int64_t total_steps, int64_t warmup_steps, float lr,
                    float min_lr) {
  if (step < warmup_steps) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  const int64_t decay_steps = total_steps - warmup_steps;
  if (decay_steps <= 1) return lr;
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - 1);
  const double coefficient = 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
  return static_cast<float>(min_lr + coefficient * (lr - min_lr));
}

GradNorm grad_norm(kernels::Context& ctx, const float* grads, int64_t n, float clip) {
  GradNorm result;
  const Tensor all = view(grads, static_cast<size_t>(n), kernels::backend_of(ctx).device());
  result.norm = static_cast<float>(std::sqrt(kernels::sums_of_squares(ctx, {all})[0]));
  if (clip > 0.0f && result.norm > clip) result.clip_factor = clip / result.norm;
  return result;
}

}  // namespace trident::optim
