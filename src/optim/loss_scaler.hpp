// Dynamic loss scaling for fp16 training (the scheme of Megatron-LM's DynamicGradScaler and
// DeepSpeed's DynamicLossScaler): the loss is multiplied by `scale` before backward so that
// small gradients survive fp16's range, and the gradients are divided by it again before the
// update. An overflow (Inf/NaN anywhere in the gradients, agreed by all ranks) skips the step.
// Once `hysteresis` overflows have happened since the last growth (not necessarily in a row),
// that overflow and every further one multiply the scale by `backoff` (not below `min_scale`).
// After `window` good steps in a row the scale is multiplied by `growth`, and the hysteresis
// budget is refilled.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/stateful.hpp"

namespace trident::optim {

struct LossScaleSettings {
  double initial_scale = 65536;  // 2^16
  double min_scale = 1;
  double growth = 2, backoff = 0.5;
  int64_t window = 1000;         // good steps between growths
  int64_t hysteresis = 2;        // overflows tolerated before a backoff
};

// The scaler's state: what a checkpoint keeps so that a resumed run scales as the
// uninterrupted one would.
struct LossScaleState {
  double scale = 1;
  int64_t good_steps = 0;        // since the last overflow or growth
  int64_t hysteresis_left = 0;
};

class LossScaler final : public ckpt::Stateful {
 public:
  explicit LossScaler(const LossScaleSettings& settings);
  double scale() const { return state_.scale; }
  // After a step: overflow = the step was skipped for Inf/NaN gradients.
  void update(bool overflow);
  const LossScaleState& state() const { return state_; }
  void restore(const LossScaleState& state) { state_ = state; }
  // Its checkpoint section (ckpt::ScalerState): the state, and back where the checkpoint has one
  // (a loss scale above 0: written by an fp16 run).
  void save(ckpt::Metadata& checkpoint) const override;
  void restore(const ckpt::Metadata& checkpoint, const std::string& path) override;

 private:
  LossScaleSettings settings_;
  LossScaleState state_;
};

}  // namespace trident::optim
