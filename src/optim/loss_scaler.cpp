// Dynamic loss scaling (the rules are stated in the header).
#include "optim/loss_scaler.hpp"

#include <algorithm>

namespace trident::optim {

LossScaler::LossScaler(const LossScaleSettings& settings) : settings_(settings) {
  state_.scale = settings.initial_scale;
  state_.hysteresis_left = settings.hysteresis;
}

void LossScaler::save(ckpt::Metadata& checkpoint) const {
  static_cast<ckpt::ScalerState&>(checkpoint) = {state_.scale, state_.good_steps, state_.hysteresis_left};
}

void LossScaler::restore(const ckpt::Metadata& checkpoint, const std::string& /*path*/) {
  if (checkpoint.loss_scale > 0)
    state_ = {checkpoint.loss_scale, checkpoint.loss_scale_good_steps, checkpoint.loss_scale_hysteresis_left};
}

void LossScaler::update(bool overflow) {
  if (overflow) {
    state_.good_steps = 0;
    if (--state_.hysteresis_left <= 0)
      state_.scale = std::max(state_.scale * settings_.backoff, settings_.min_scale);
    return;
  }
  if (++state_.good_steps == settings_.window) {
    state_.good_steps = 0;
    state_.hysteresis_left = settings_.hysteresis;
    state_.scale *= settings_.growth;
  }
}

}  // namespace trident::optim
