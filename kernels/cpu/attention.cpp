// Causal multi-head self-attention: the two products per head are batched oneDNN matmuls over
// (B·NH); the causal softmax and the layout permutes are OpenMP loops.
//
// Forward, per (b, h):  S = q kᵀ · 1/√hs;  P = softmax_causal(S);  y = P v
// Backward:             dP = dy vᵀ;  dv = Pᵀ dy;  dS = P ⊙ (dP − rowsum(dP ⊙ P)) · 1/√hs;
//                       dq = dS k;  dk = dSᵀ q
// The full T×T products are computed (the masked half multiplies zeros in P): simple, and a
// single large GEMM is faster on the CPU than T small triangular ones.
#include <cmath>

#include "kernels/cpu/vector_math.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels {
namespace {

// qkv (B, T, 3C) -> q, k, v (B, NH, T, hs)
void split_heads(float* q, float* k, float* v, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* row = qkv + (static_cast<size_t>(b) * T + t) * 3 * C;
      for (int h = 0; h < NH; ++h) {
        const size_t at = ((static_cast<size_t>(b) * NH + h) * T + t) * hs;
        for (int i = 0; i < hs; ++i) {
          q[at + i] = row[h * hs + i];
          k[at + i] = row[C + h * hs + i];
          v[at + i] = row[2 * C + h * hs + i];
        }
      }
    }
}

// y (B, NH, T, hs) -> out (B, T, C); also used to gather dq, dk, dv into dqkv with an offset.
void merge_heads(float* out, int out_stride, int offset, const float* y, int B, int T, int C,
                 int NH) {
  const int hs = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* row = out + (static_cast<size_t>(b) * T + t) * out_stride + offset;
      for (int h = 0; h < NH; ++h) {
        const float* src = y + ((static_cast<size_t>(b) * NH + h) * T + t) * hs;
        for (int i = 0; i < hs; ++i) row[h * hs + i] = src[i];
      }
    }
}

// att (rows of T) <- causal softmax of scale · att, in place; entries above the diagonal = 0.
void causal_softmax(float* att, int rows, int T, float scale) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const int t = r % T;  // query position
    float* p = att + static_cast<size_t>(r) * T;
    float max = -INFINITY;
#pragma omp simd reduction(max : max)
    for (int s = 0; s <= t; ++s) max = p[s] * scale > max ? p[s] * scale : max;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int s = 0; s <= t; ++s) {
      p[s] = vexp(p[s] * scale - max);
      sum += p[s];
    }
    const float inv = 1.0f / sum;
    for (int s = 0; s <= t; ++s) p[s] *= inv;
    for (int s = t + 1; s < T; ++s) p[s] = 0.0f;
  }
}

// datt <- P ⊙ (dP − rowsum(dP ⊙ P)) · scale, in place over dP.
void softmax_backward(float* datt, const float* att, int rows, int T, float scale) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const int t = r % T;
    float* d = datt + static_cast<size_t>(r) * T;
    const float* p = att + static_cast<size_t>(r) * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int s = 0; s <= t; ++s) dot += d[s] * p[s];
    for (int s = 0; s <= t; ++s) d[s] = p[s] * (d[s] - dot) * scale;
    for (int s = t + 1; s < T; ++s) d[s] = 0.0f;
  }
}

}  // namespace

void attention_forward(Context& ctx, float* out, float* q, float* k, float* v, float* att,
                       float* y_heads, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH, batch = B * NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  split_heads(q, k, v, qkv, B, T, C, NH);
  batched_matmul(ctx, att, q, k, batch, T, T, hs, false, true, false);      // S = q kᵀ
  causal_softmax(att, batch * T, T, scale);                                  // P
  batched_matmul(ctx, y_heads, att, v, batch, T, hs, T, false, false, false);  // y = P v
  merge_heads(out, C, 0, y_heads, B, T, C, NH);
}

void attention_backward(Context& ctx, float* dqkv, float* dq, float* dk, float* dv, float* datt,
                        float* dy, const float* dout, const float* q, const float* k,
                        const float* v, const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH, batch = B * NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // dout (B, T, C) -> dy (B, NH, T, hs): split_heads reads a (B, T, 3C) row, so gather directly.
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* src = dout + (static_cast<size_t>(b) * T + t) * C + h * hs;
        float* dst = dy + ((static_cast<size_t>(b) * NH + h) * T + t) * hs;
        for (int i = 0; i < hs; ++i) dst[i] = src[i];
      }
  batched_matmul(ctx, datt, dy, v, batch, T, T, hs, false, true, false);  // dP = dy vᵀ
  batched_matmul(ctx, dv, att, dy, batch, T, hs, T, true, false, false);  // dv = Pᵀ dy
  softmax_backward(datt, att, batch * T, T, scale);                        // dS
  batched_matmul(ctx, dq, datt, k, batch, T, hs, T, false, false, false);  // dq = dS k
  batched_matmul(ctx, dk, datt, q, batch, T, hs, T, true, false, false);   // dk = dSᵀ q
  merge_heads(dqkv, 3 * C, 0, dq, B, T, C, NH);
  merge_heads(dqkv, 3 * C, C, dk, B, T, C, NH);
  merge_heads(dqkv, 3 * C, 2 * C, dv, B, T, C, NH);
}

}  // namespace trident::kernels
