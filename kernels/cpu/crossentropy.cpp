// Fused softmax cross-entropy over the valid vocabulary of each row (padded columns ignored).
#include <cmath>

#include "kernels/kernels.hpp"

namespace trident::kernels {
namespace {

// max and log Σ exp(x − max) over the first V entries, in double for the sum.
void row_log_normalizer(const float* row, int V, float& max, double& log_sum) {
  max = -INFINITY;
  for (int i = 0; i < V; ++i) max = std::fmax(max, row[i]);
  double sum = 0.0;
  for (int i = 0; i < V; ++i) sum += std::exp(static_cast<double>(row[i] - max));
  log_sum = std::log(sum);
}

}  // namespace

void crossentropy_forward(Context&, float* losses, const float* logits, const int32_t* targets,
                          int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * Vp;
    float max;
    double log_sum;
    row_log_normalizer(row, V, max, log_sum);
    losses[n] = static_cast<float>(log_sum - (row[targets[n]] - max));
  }
}

void crossentropy_backward(Context&, float* dlogits, const float* logits,
                           const int32_t* targets, float scale, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * Vp;
    float* d = dlogits + static_cast<size_t>(n) * Vp;
    float max;
    double log_sum;
    row_log_normalizer(row, V, max, log_sum);
    const float shift = max + static_cast<float>(log_sum);
    const int target = targets[n];
    for (int i = 0; i < V; ++i) d[i] = (std::exp(row[i] - shift) - (i == target ? 1.0f : 0.0f)) * scale;
    for (int i = V; i < Vp; ++i) d[i] = 0.0f;
  }
}

}  // namespace trident::kernels
