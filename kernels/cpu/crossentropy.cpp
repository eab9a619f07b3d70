// Fused softmax cross-entropy over the valid vocabulary of each row (padded columns ignored).
#include <cmath>

#include "kernels/cpu/vector_math.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels {
namespace {

// max and log Σ exp(x − max) over the first V entries (vectorized; every term is ≤ 1 and one
// is exactly 1, so a float sum loses nothing that matters against the log).
void row_log_normalizer(const float* row, int V, float& max, double& log_sum) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < V; ++i) m = row[i] > m ? row[i] : m;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < V; ++i) sum += vexp(row[i] - m);
  max = m;
  log_sum = std::log(static_cast<double>(sum));
}

}  // namespace

void crossentropy_forward(Context&, float* losses, float* log_normalizers, const float* logits,
                          const int32_t* targets, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * Vp;
    float max;
    double log_sum;
    row_log_normalizer(row, V, max, log_sum);
    losses[n] = static_cast<float>(log_sum - (row[targets[n]] - max));
    log_normalizers[n] = max + static_cast<float>(log_sum);
  }
}

void crossentropy_backward(Context&, float* dlogits, const float* logits,
                           const float* log_normalizers, const int32_t* targets, float scale,
                           int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * Vp;
    float* d = dlogits + static_cast<size_t>(n) * Vp;
    const float shift = log_normalizers[n];
    const int target = targets[n];
#pragma omp simd
    for (int i = 0; i < V; ++i) d[i] = vexp(row[i] - shift) * scale;
    d[target] -= scale;
    for (int i = V; i < Vp; ++i) d[i] = 0.0f;
  }
}

}  // namespace trident::kernels
