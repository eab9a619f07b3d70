// Softmax cross-entropy over a (possibly tensor-split) vocabulary, in vectorized row passes.
#include <cmath>

#include "kernels/common/math.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/workspace.hpp"

namespace trident::kernels::cpu {
namespace {

// One row's pieces, shared by the piecewise kernels and the fused one so that both give the same
// bits: the max over the valid columns, and Σ exp(logit − max) (in index order in the portable
// arithmetic).
inline float row_max(const float* row, int valid) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < valid; ++i) m = row[i] > m ? row[i] : m;
  return m;
}

inline float row_sum(const Context& ctx, const float* row, float m, int valid) {
  // Every term is ≤ 1 and the largest row's is 1: a float sum loses nothing that matters
  // against the log.
  float sum = 0.0f;
  if (ctx.arithmetic == Arithmetic::portable) {
    for (int i = 0; i < valid; ++i) sum += vexp(row[i] - m);  // in index order
  } else {
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < valid; ++i) sum += vexp(row[i] - m);
  }
  return sum;
}

// The target's logit where the slice holds its column (slice_column), else 0.
inline float target_logit(const float* row, int column) { return column >= 0 ? row[column] : 0.0f; }

// One row of dlogits in f32 from its logits: (softmax − onehot) · scale, 0 on the padding.
inline void gradient_row(float* d, const float* row, float shift, int target, float scale, int valid, int ld) {
#pragma omp simd
  for (int i = 0; i < valid; ++i) d[i] = vexp(row[i] - shift) * scale;
  if (target >= 0 && target < valid) d[target] -= scale;
  for (int i = valid; i < ld; ++i) d[i] = 0.0f;
}

// The rows a 16-bit dlogits is computed in, in f32 before it is rounded: ld floats a thread, one
// workspace for both kernels that write 16-bit dlogits.
PerThread gradient_rows(int ld) {
  static Buffer<float> workspace;
  return per_thread(workspace, static_cast<size_t>(ld));
}

}  // namespace

void crossentropy_row_max(Context&, float* maxes, const float* logits, int N, int valid, int ld) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) maxes[n] = row_max(logits + static_cast<size_t>(n) * ld, valid);
}

void crossentropy_row_sums(Context& ctx, float* sums, float* target_logits, const float* logits,
                           const float* maxes, const int32_t* targets, int vocab_begin, int N,
                           int valid, int ld) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + static_cast<size_t>(n) * ld;
    sums[n] = row_sum(ctx, row, maxes[n], valid);
    target_logits[n] = target_logit(row, slice_column(targets[n], vocab_begin, valid));
  }
}

void crossentropy_losses(Context&, float* losses, float* log_normalizers, const float* maxes,
                         const float* sums, const float* target_logits, int N) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) crossentropy_row(maxes[n], sums[n], target_logits[n], losses[n], log_normalizers[n]);
}

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
  const PerThread rows = gradient_rows(ld);
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

// Row by row, the pieces' row functions in their order: the row's max, Σ exp, loss and gradient
// (written in f32 where dlogits is, else in the thread's workspace row and rounded), while the
// row is in cache.
void crossentropy_forward_backward(Context& ctx, float* losses, float* log_normalizers, float* dlogits,
                                   low16* dlogits_low, Precision precision, const float* logits,
                                   const int32_t* targets, float scale, int N, int valid, int ld) {
  const PerThread rows = dlogits_low != nullptr ? gradient_rows(ld) : PerThread{nullptr, 0};
#pragma omp parallel
  {
    float* d = dlogits_low != nullptr ? rows.mine() : nullptr;
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const size_t at = static_cast<size_t>(n) * ld;
      const float* row = logits + at;
      const float m = row_max(row, valid), sum = row_sum(ctx, row, m, valid);
      crossentropy_row(m, sum, target_logit(row, slice_column(targets[n], 0, valid)), losses[n], log_normalizers[n]);
      gradient_row(d != nullptr ? d : dlogits + at, row, log_normalizers[n], targets[n], scale, valid, ld);
      if (d != nullptr) to_low(ctx, precision, dlogits_low + at, d, static_cast<size_t>(ld));
    }
  }
}

}  // namespace trident::kernels::cpu
