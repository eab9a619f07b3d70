// What the model tests share: a model's parameters set from GPT-2's initialisation in any
// precision (through the host, as a job sets them).
#pragma once

#include <cstdint>
#include <vector>

#include "model/gpt2.hpp"
#include "model/params.hpp"

namespace trident::testing {

// init_params(seed) times `scale`, uploaded (rounded to a 16-bit model's type).
inline void initialise(model::Gpt2& gpt, uint64_t seed, float scale = 1.0f) {
  std::vector<float> values(static_cast<size_t>(gpt.num_parameters()));
  model::init_params(gpt.config(), values.data(), seed, gpt.partition());
  for (float& v : values) v *= scale;
  gpt.upload_params(values.data());
}

}  // namespace trident::testing
