// Column sums of a row-major matrix in a fixed order (deterministic, independent of threads):
// bias gradients and LayerNorm parameter gradients are sums over all rows.
#pragma once

#include <cstddef>

namespace trident::kernels {

constexpr int kColumnBlock = 64;  // columns per task: 4 cache lines, a vector-friendly stripe

// out[c] += Σ_r x[r, c] for x (rows, cols)
inline void column_sums_add(float* out, const float* x, int rows, int cols) {
  const int blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < blocks; ++block) {
    const int c0 = block * kColumnBlock;
    const int width = cols - c0 < kColumnBlock ? cols - c0 : kColumnBlock;
    float sums[kColumnBlock] = {0};
    for (int r = 0; r < rows; ++r) {
      const float* row = x + static_cast<size_t>(r) * cols + c0;
      for (int j = 0; j < width; ++j) sums[j] += row[j];
    }
    for (int j = 0; j < width; ++j) out[c0 + j] += sums[j];
  }
}

}  // namespace trident::kernels
