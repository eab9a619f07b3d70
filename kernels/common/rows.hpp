// The per-row and per-element arithmetic of LayerNorm, the causal softmax of attention and the
// fused cross-entropy, shared by the CPU reference tests and the CUDA kernels (which reduce a
// row over a thread block and then apply these to each element). The unit tests
// (tests/unit/test_shared_arithmetic.cpp) rebuild the CPU backend's results from them.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/math.hpp"

namespace trident::kernels {

constexpr float kLayerNormEpsilon = 1e-5f;

// 1/√(variance + ε), the LayerNorm scale of a row.
TRIDENT_HD inline float layernorm_rstd(float variance) { return 1.0f / sqrtf(variance + kLayerNormEpsilon); }

// out = (x − mean) · rstd · weight + bias
TRIDENT_HD inline float layernorm_value(float x, float mean, float rstd, float weight, float bias) {
  return (x - mean) * rstd * weight + bias;
}

// ∂loss/∂x of one element: rstd (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)), dx̂ = dout · weight, with the
// row's two means given.
TRIDENT_HD inline float layernorm_input_gradient(float dout, float weight, float xhat, float rstd,
                                                 float mean_dxhat, float mean_dxhat_xhat) {
  return rstd * (dout * weight - mean_dxhat - xhat * mean_dxhat_xhat);
}

// Causal softmax of a row of scores s (t + 1 entries valid for query position t):
// p = exp(scale · s − max) / Σ, max over scale · s.
TRIDENT_HD inline float softmax_numerator(float score, float scale, float scaled_max) {
  return vexp(score * scale - scaled_max);
}

// dS = P ⊙ (dP − rowsum(dP ⊙ P)) · scale, per element, with the row's rowsum.
TRIDENT_HD inline float softmax_gradient(float p, float dp, float dot, float scale) { return p * (dp - dot) * scale; }

// The column of token `target` in a vocabulary slice [vocab_begin, vocab_begin + columns), or −1
// where another rank holds it: embedding rows and cross-entropy targets alike.
TRIDENT_HD inline int slice_column(int32_t target, int vocab_begin, int columns) {
  const int column = target - vocab_begin;
  return column >= 0 && column < columns ? column : -1;
}

// Whether the one-kernel cross-entropy holds a row of `valid` f32 logits in a GPU block's shared
// memory of `shared_bytes` (1 KB beside it for the block reductions): the CUDA backend's choice
// (kernels/cuda/crossentropy.cu), and the planner's (plan/step_model.cpp).
inline bool loss_row_fits(int valid, double shared_bytes) { return 4.0 * valid + 1024 <= shared_bytes; }

// The row's loss and the log-normalizer backward needs, from the row's combined max, Σ exp and
// target logit: loss = log Σ − (target − max), in double for the log as on the CPU.
TRIDENT_HD inline void crossentropy_row(float max, float sum, float target_logit, float& loss,
                                        float& log_normalizer) {
  const double log_sum = log(static_cast<double>(sum));
  loss = static_cast<float>(log_sum - (target_logit - max));
  log_normalizer = max + static_cast<float>(log_sum);
}

// dlogit = (softmax − onehot) · scale, the one-hot part subtracted by the caller at the target.
TRIDENT_HD inline float crossentropy_gradient(float logit, float log_normalizer, float scale) {
  return vexp(logit - log_normalizer) * scale;
}

}  // namespace trident::kernels
