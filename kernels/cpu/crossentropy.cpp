// Softmax cross-entropy over a (possibly tensor-split) vocabulary, in vectorized row passes.
#include <cmath>

#include "kernels/common/math.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/workspace.hpp"

namespace trident::kernels::cpu {

void crossentropy_row_max(Context&, float* maxes, const float* logits, int N, int valid, int ld) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * ld;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int i = 0; i < valid; ++i) m = row[i] > m ? row[i] : m;
    maxes[n] = m;
  }
}

void crossentropy_row_sums(Context& ctx, float* sums, float* target_logits, const float* logits,
                           const float* maxes, const int32_t* targets, int vocab_begin, int N,
                           int valid, int ld) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * ld;
    const float m = maxes[n];
    // Every term is ≤ 1 and the largest row's is 1: a float sum loses nothing that matters
    // against the log.
    float sum = 0.0f;
    if (ctx.arithmetic == Arithmetic::portable) {
      for (int i = 0; i < valid; ++i) sum += vexp(row[i] - m);  // in index order
    } else {
#pragma omp simd reduction(+ : sum)
      for (int i = 0; i < valid; ++i) sum += vexp(row[i] - m);
    }
    sums[n] = sum;
    const int column = targets[n] - vocab_begin;
    target_logits[n] = column >= 0 && column < valid ? row[column] : 0.0f;
  }
}

void crossentropy_losses(Context&, float* losses, float* log_normalizers, const float* maxes,
                         const float* sums, const float* target_logits, int N) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const double log_sum = std::log(static_cast<double>(sums[n]));
    losses[n] = static_cast<float>(log_sum - (target_logits[n] - maxes[n]));
    log_normalizers[n] = maxes[n] + static_cast<float>(log_sum);
  }
}

namespace {

// One row of dlogits in f32 from its logits: (softmax − onehot) · scale, 0 on the padding.
inline void gradient_row(float* d, const float* row, float shift, int target, float scale, int valid, int ld) {
#pragma omp simd
  for (int i = 0; i < valid; ++i) d[i] = vexp(row[i] - shift) * scale;
  if (target >= 0 && target < valid) d[target] -= scale;
  for (int i = valid; i < ld; ++i) d[i] = 0.0f;
}

}  // namespace

void crossentropy_backward(Context&, float* dlogits, const float* logits,
                           const float* log_normalizers, const int32_t* targets, int vocab_begin,
                           float scale, int N, int valid, int ld) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n)
    gradient_row(dlogits + static_cast<size_t>(n) * ld, logits + static_cast<size_t>(n) * ld, log_normalizers[n],
                 targets[n] - vocab_begin, scale, valid, ld);
}

// Each row in f32 in the thread's part of a workspace (the f32 kernel's arithmetic; ld floats a
// thread, kernels/cpu/workspace.hpp), then rounded (to_low: one thread's row, inside this
// parallel loop).
void crossentropy_backward_low16(Context& ctx, Precision precision, low16* dlogits, const float* logits,
                                 const float* log_normalizers, const int32_t* targets, int vocab_begin, float scale,
                                 int N, int valid, int ld) {
  static Buffer<float> workspace;
  const PerThread rows = per_thread(workspace, static_cast<size_t>(ld));
#pragma omp parallel
  {
    float* d = rows.mine();
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      gradient_row(d, logits + static_cast<size_t>(n) * ld, log_normalizers[n], targets[n] - vocab_begin, scale, valid,
                   ld);
      to_low(ctx, precision, dlogits + static_cast<size_t>(n) * ld, d, static_cast<size_t>(ld));
    }
  }
}

}  // namespace trident::kernels::cpu
