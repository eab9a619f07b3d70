// The per-element arithmetic of Llama's parts — RMSNorm, rotary positions, SwiGLU — shared by the
// CPU kernels and the CUDA kernels (kernels/cpu/llama.cpp, kernels/cuda/llama.cu), so that both
// compute each element by the same formula.
#pragma once

#include <cmath>

#include "kernels/common/math.hpp"
#include "kernels/common/rope_frequencies.hpp"

namespace trident::kernels {

// RMSNorm's scale of a row of C values whose squares sum to `squares`: 1/√(Σx²/C + ε).
TRIDENT_HD inline float rmsnorm_rstd(float squares, int C, float eps) { return 1.0f / sqrtf(squares / C + eps); }

// ∂loss/∂x_j = rstd·w_j·dy_j − x_j·rstd³·(Σ_k w_k dy_k x_k)/C, with the row's sum `dot` given.
TRIDENT_HD inline float rmsnorm_input_gradient(float x, float w, float dy, float rstd, float dot, int C) {
  return rstd * w * dy - x * rstd * rstd * rstd * dot / C;
}

// Rotary positions (Su et al. 2021) in Hugging Face's layout ("rotate_half"): within a head of
// hs values, value i and value i + hs/2 (i < hs/2) are a pair rotated by position · f_i, with
// f_i = θ^(−2i/hs) — and, for Llama 3.1's long context (rope_type "llama3"), f_i scaled by its
// wavelength λ = 2π/f_i against the original context n: kept where λ < n/high, divided by `factor`
// where λ > n/low, and between the two (1 − s)·f_i/factor + s·f_i with s = (n/λ − low)/(high − low).
// The frequency and the angle in f32, as transformers' LlamaRotaryEmbedding computes them.
TRIDENT_HD inline float rope_inverse_frequency(int i, int head_size, const RopeFrequencies& r) {
  const float f = 1.0f / powf(r.theta, static_cast<float>(2 * i) / static_cast<float>(head_size));
  if (r.factor == 1.0f) return f;
  const float wavelength = 6.283185307179586f / f;
  if (wavelength < r.original_context / r.high_freq_factor) return f;
  if (wavelength > r.original_context / r.low_freq_factor) return f / r.factor;
  const float smooth = (r.original_context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1.0f - smooth) * f / r.factor + smooth * f;
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
