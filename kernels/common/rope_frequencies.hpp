// The rotary positions' frequencies: base θ and Llama 3.1's scaling of them (rope_type "llama3"),
// as the model passes them to the rope kernel (kernels/ops.inc); the formula is
// rope_inverse_frequency's (kernels/common/llama_math.hpp).
#pragma once

namespace trident::kernels {

struct RopeFrequencies {
  float theta = 10000.0f;
  float factor = 1.0f;  // 1: no scaling
  float low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  float original_context = 8192.0f;  // the context the model was first trained at (n)
};

}  // namespace trident::kernels
