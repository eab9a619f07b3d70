// The per-element arithmetic of Llama's parts — RMSNorm, rotary positions, SwiGLU — shared by the
// CPU kernels and the CUDA kernels (kernels/cpu/llama.cpp, kernels/cuda/llama.cu), so that both
// compute each element by the same formula.
#pragma once

#include <cmath>

#include "kernels/common/math.hpp"

namespace trident::kernels {

// RMSNorm's scale of a row of C values whose squares sum to `squares`: 1/√(Σx²/C + ε).
TRIDENT_HD inline float rmsnorm_rstd(float squares, int C, float eps) { return 1.0f / sqrtf(squares / C + eps); }

// ∂loss/∂x_j = rstd·w_j·dy_j − x_j·rstd³·(Σ_k w_k dy_k x_k)/C, with the row's sum `dot` given.
TRIDENT_HD inline float rmsnorm_input_gradient(float x, float w, float dy, float rstd, float dot, int C) {
  return rstd * w * dy - x * rstd * rstd * rstd * dot / C;
}

// Rotary positions (Su et al. 2021) in Hugging Face's layout ("rotate_half"): within a head of
// hs values, value i and value i + hs/2 (i < hs/2) are a pair rotated by position · θ^(−2i/hs).
// The frequency and the angle in f32, as transformers' LlamaRotaryEmbedding computes them.
TRIDENT_HD inline float rope_inverse_frequency(int i, int head_size, float theta) {
  return 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
}
// (a, b) ← (a cos − b sin, b cos + a sin); the inverse (backward) rotates by −angle.
TRIDENT_HD inline void rope_rotate(float& a, float& b, float cos_angle, float sin_angle) {
  const float x = a, y = b;
  a = x * cos_angle - y * sin_angle;
  b = y * cos_angle + x * sin_angle;
}

// SwiGLU's gate: silu(g) = g·σ(g).
TRIDENT_HD inline float sigmoid(float g) { return 1.0f / (1.0f + vexp(-g)); }
TRIDENT_HD inline float swiglu_value(float gate, float up) { return gate * sigmoid(gate) * up; }
// The two input gradients of h = silu(g)·u: ∂/∂g = dh·u·σ(g)(1 + g(1 − σ(g))), ∂/∂u = dh·silu(g).
TRIDENT_HD inline void swiglu_gradients(float gate, float up, float dh, float& dgate, float& dup) {
  const float s = sigmoid(gate);
  dgate = dh * up * s * (1.0f + gate * (1.0f - s));
  dup = dh * gate * s;
}

}  // namespace trident::kernels
