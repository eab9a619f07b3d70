// AdamW, the learning-rate schedule and gradient clipping.
#include "optim/adamw.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/backend.hpp"
#include "model/params.hpp"

namespace trident::optim {

AdamW::AdamW(const kernels::Context& device, const model::GptConfig& config, const AdamWSettings& settings,
             const model::Partition& slice, model::FlatRanges owned, kernels::Precision precision,
             bool state_order_gradients, bool state_order_params)
    : settings_(settings),
      owned_(std::move(owned)),
      state_order_gradients_(state_order_gradients),
      state_order_params_(state_order_params) {
  if (owned_.empty()) owned_ = {{0, model::num_parameters(config, slice)}};
  kernels::Backend& backend = kernels::backend_of(device);
  const size_t n = static_cast<size_t>(model::total_count(owned_));
  m_ = Buffer<float>(n, MemoryCategory::OptimizerState, backend, MemoryKind::device);
  v_ = Buffer<float>(n, MemoryCategory::OptimizerState, backend, MemoryKind::device);
  if (precision != kernels::Precision::fp32)
    master_ = Buffer<float>(n, MemoryCategory::OptimizerState, backend, MemoryKind::device);
  const auto specs = model::param_specs(config, slice);
  int64_t state = 0;
  for (const model::FlatRange& flat : owned_) {
    Range range{flat, state, {}};
    int64_t offset = 0;
    for (const model::ParamSpec& spec : specs) {
      const int64_t begin = std::max(offset, flat.begin), end = std::min(offset + spec.count(), flat.end);
      if (begin < end) range.segments.push_back({begin - flat.begin, end - begin, spec.weight_decay});
      offset += spec.count();
    }
    ranges_.push_back(std::move(range));
    state += flat.count();
  }
}

// One fused update per owned range (one range without ZeRO: the whole buffer in one call).
void AdamW::step(kernels::Context& ctx, const Tensor& params, const float* grads, float lr, int64_t t,
                 float grad_scale, const Tensor& control) {
  const Device device = m_.device();  // the parameters' and gradients' too
  for (const Range& r : ranges_) {
    const int64_t n = r.flat.count();
    const Tensor own = params.elements(params_at(r), n);
    const Tensor gradients =
        view(grads + (state_order_gradients_ ? r.state_begin : r.flat.begin), static_cast<size_t>(n), device);
    // fp32: the parameters are the master; 16-bit: the master is ours, its rounding written to them.
    const Tensor master = keeps_master() ? master_.view().elements(r.state_begin, n) : own;
    const Tensor low = keeps_master() ? own : Tensor{};
    kernels::adamw_update(ctx, master, low, gradients, m_.view().elements(r.state_begin, n),
                          v_.view().elements(r.state_begin, n), r.segments, lr, settings_.beta1, settings_.beta2,
                          settings_.eps, settings_.weight_decay, t, grad_scale, control);
  }
}

int64_t AdamW::params_at(const Range& r) const { return state_order_params_ ? r.state_begin : r.flat.begin; }

void AdamW::load_master(kernels::Context& ctx, const float* host_slice) {
  if (!keeps_master()) return;
  for (const Range& r : ranges_)
    kernels::upload(ctx, master_.view().elements(r.state_begin, r.flat.count()), host_slice + r.flat.begin);
}

void AdamW::load_owned_master(kernels::Context& ctx, const float* owned_values) {
  if (keeps_master()) kernels::upload(ctx, master_.view(), owned_values);
}

void AdamW::write_master_into(kernels::Context& ctx, const Tensor& params) {
  if (!keeps_master()) return;
  for (const Range& r : ranges_)
    kernels::convert(ctx, params.elements(params_at(r), r.flat.count()),
                     master_.view().elements(r.state_begin, r.flat.count()));
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
