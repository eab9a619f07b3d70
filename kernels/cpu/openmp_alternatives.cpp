// Our own OpenMP LayerNorm (forward, backward) and GELU forward: measured against oneDNN's
// primitives by `trident bench --kernels`, which were faster on every shape we train (see
// docs/PERFORMANCE.md), so the model uses oneDNN's; these stay as the measured alternative.
#include "kernels/cpu/openmp_alternatives.hpp"

#include <cmath>

#include "kernels/cpu/column_sums.hpp"
#include "kernels/common/math.hpp"

namespace trident::kernels::openmp {

constexpr float kLayerNormEps = 1e-5f;

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float* y = out + static_cast<size_t>(n) * C;
    float sum = 0.0f;
    for (int c = 0; c < C; ++c) sum += x[c];
    const float m = sum / C;
    float var = 0.0f;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(var / C + kLayerNormEps);
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C) {
  // dinp = rstd · (g − mean(g) − x̂ · mean(g · x̂)),  g = dout · weight,  x̂ = (x − μ) · rstd
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    const float* dy = dout + static_cast<size_t>(n) * C;
    float* dx = dinp + static_cast<size_t>(n) * C;
    float g_mean = 0.0f, gx_mean = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float g = dy[c] * weight[c];
      g_mean += g;
      gx_mean += g * (x[c] - mean[n]) * rstd[n];
    }
    g_mean /= C;
    gx_mean /= C;
    for (int c = 0; c < C; ++c) {
      const float xhat = (x[c] - mean[n]) * rstd[n];
      dx[c] += rstd[n] * (dy[c] * weight[c] - g_mean - xhat * gx_mean);
    }
  }
  column_sums_add(dbias, dout, N, C);
  const int blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < blocks; ++block) {
    const int c0 = block * kColumnBlock;
    const int width = C - c0 < kColumnBlock ? C - c0 : kColumnBlock;
    float sums[kColumnBlock] = {0};
    for (int n = 0; n < N; ++n) {
      const float* x = inp + static_cast<size_t>(n) * C + c0;
      const float* dy = dout + static_cast<size_t>(n) * C + c0;
      for (int j = 0; j < width; ++j) sums[j] += dy[j] * (x[j] - mean[n]) * rstd[n];
    }
    for (int j = 0; j < width; ++j) dweight[c0 + j] += sums[j];
  }
}

void gelu_forward(float* out, const float* inp, size_t n) {
  constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = x / (1.0f + vexp(-2.0f * kGeluScale * (x + 0.044715f * x * x * x)));
  }
}

}  // namespace trident::kernels::openmp
