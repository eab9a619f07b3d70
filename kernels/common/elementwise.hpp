// The per-element arithmetic of GELU, AdamW and the gradient norm, shared by the CPU reference
// tests and the CUDA kernels (kernels/cuda/elementwise.cu): the CUDA kernels call these; the
// unit tests (tests/unit/test_shared_arithmetic.cpp) hold them to the CPU backend's kernels on
// random inputs. The CPU kernels keep their own vectorized loops (GELU forward is oneDNN's).
#pragma once

#include <cmath>
#include <cstddef>

#include "kernels/common/math.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels {

constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)

// GELU, tanh approximation: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), computed as x σ(2u)
// = x / (1 + e^(−2u)): the same function without the cancellation of 1 + tanh u → 0 for large
// negative x (where 1 + tanhf loses every digit of a result near 1e-6).
TRIDENT_HD inline float gelu_value(float x) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}

// dinp = dout · d/dx [x σ(2u)] = dout (σ(2u) + 2x σ(2u)(1 − σ(2u)) u'),  σ(2u) = (1 + tanh u)/2:
// the CPU's gelu_backward, element by element.
TRIDENT_HD inline float gelu_gradient(float x, float dout) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  const float s = 1.0f / (1.0f + vexp(-2.0f * u));
  const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
  return dout * (s + 2.0f * x * s * (1.0f - s) * du);
}

// One AdamW step's constants: the bias corrections 1 − βᵗ computed once per step (in float, by
// std::pow on the host, as the CPU kernel does).
struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay, grad_scale, correction1, correction2;
};

inline AdamWStep adamw_step(float lr, float beta1, float beta2, float eps, float weight_decay, long long t,
                            float grad_scale) {
  return {lr, beta1, beta2, eps, weight_decay, grad_scale,
          1.0f - std::pow(beta1, static_cast<float>(t)), 1.0f - std::pow(beta2, static_cast<float>(t))};
}

// One parameter's update: the moments m, v and the parameter, in place.
TRIDENT_HD inline void adamw_element(const AdamWStep& s, float& param, float grad, float& m, float& v) {
  const float g = grad * s.grad_scale;
  const float m_i = s.beta1 * m + (1.0f - s.beta1) * g;
  const float v_i = s.beta2 * v + (1.0f - s.beta2) * g * g;
  m = m_i;
  v = v_i;
  const float m_hat = m_i / s.correction1;
  const float v_hat = v_i / s.correction2;
  param -= s.lr * (m_hat / (sqrtf(v_hat) + s.eps) + s.weight_decay * param);
}

// Σ x² in double in the fixed chunks of the CPU's sum_of_squares: one chunk [begin, end), its
// element i summed into lane i mod kLanes, then the tail, then the lanes in order. The chunks'
// sums are then added in chunk order: the same total for any thread count, on either backend.
constexpr size_t kSumOfSquaresChunk = 8192;
constexpr int kSumOfSquaresLanes = 16;

// Where the chunk [begin, end)'s full groups of kLanes end: its tail [tail, end) is summed apart.
TRIDENT_HD inline size_t sum_of_squares_tail(size_t begin, size_t end) {
  return begin + (end - begin) / kSumOfSquaresLanes * kSumOfSquaresLanes;
}

TRIDENT_HD inline double sum_of_squares_tail_sum(const float* x, size_t tail, size_t end) {
  double sum = 0.0;
  for (size_t i = tail; i < end; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

TRIDENT_HD inline double sum_of_squares_chunk(const float* x, size_t begin, size_t end) {
  double lane[kSumOfSquaresLanes] = {};
  const size_t tail = sum_of_squares_tail(begin, end);
  for (size_t i = begin; i < tail; i += kSumOfSquaresLanes)
    for (int l = 0; l < kSumOfSquaresLanes; ++l) lane[l] += static_cast<double>(x[i + l]) * x[i + l];
  double sum = sum_of_squares_tail_sum(x, tail, end);
  for (double l : lane) sum += l;
  return sum;
}

// The same chunk's sum split over its lanes, for a GPU's lanes to run side by side (their loads
// coalesced): lane l's sum over the full groups (the value of sum_of_squares_chunk's lane[l], its
// additions in the same order); the tail's sum, then the lanes' in order, give the chunk's.
TRIDENT_HD inline double sum_of_squares_lane(const float* x, size_t begin, size_t tail, int l) {
  double lane = 0.0;
  for (size_t i = begin + l; i < tail; i += kSumOfSquaresLanes) lane += static_cast<double>(x[i]) * x[i];
  return lane;
}

// kernels::mean_losses_into: the step's loss sum, each micro-batch's mean rounded to float and
// added in double in micro-batch order (what the pipeline's host loop did before).
TRIDENT_HD inline double mean_loss_sum(const double* sums, size_t m, double tokens) {
  double total = 0.0;
  for (size_t i = 0; i < m; ++i) total += static_cast<float>(sums[i] / tokens);
  return total;
}

// Finite: neither NaN nor ±Inf (a comparison NaN fails), whatever the compiler assumes of isfinite.
TRIDENT_HD inline bool finite_value(float x) { return fabsf(x) <= 3.402823466e38f; }

// kernels::step_control's arithmetic on the scalars (StepScalar's layout), in place.
TRIDENT_HD inline void step_decisions(double* s, float clip, double gradient_scale, double loss_divisor) {
  const float loss = static_cast<float>(s[kLossSum] / loss_divisor);
  const float norm = static_cast<float>(sqrt(s[kSquaresSplit] + s[kSquaresReplicated]) / gradient_scale);
  const float factor = clip > 0.0f && norm > clip ? clip / norm : 1.0f;
  s[kLoss] = loss;
  s[kGradNorm] = norm;
  s[kUpdateScale] = static_cast<float>(factor / gradient_scale);
  s[kSkipStep] = finite_value(loss) && finite_value(norm) ? 0.0 : 1.0;
}

}  // namespace trident::kernels
