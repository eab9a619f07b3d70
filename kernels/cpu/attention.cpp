// Causal multi-head self-attention: the products per head are oneDNN matmuls over the
// (B, NH) grid that read q, k, v straight out of the fused qkv activation and write the heads
// straight into their place in the output (strided views, no permute copies); the causal
// softmax and its backward are OpenMP loops.
//
// Forward, per (b, h):  S = q kᵀ · 1/√hs;  P = softmax_causal(S);  y = P v
// Backward:             dP = dy vᵀ;  dv = Pᵀ dy;  dS = P ⊙ (dP − rowsum(dP ⊙ P)) · 1/√hs;
//                       dq = dS k;  dk = dSᵀ q
// The full T×T products are computed (the masked half multiplies zeros in P): simple, and a
// single large GEMM is faster on the CPU than T small triangular ones. The bf16 variants run
// the same steps with bf16 operands (optim.precision = bf16).
#include <cmath>

#include "kernels/cpu/vector_math.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels {
namespace {

// The (batch, head) views attention works on, as strides into the activations.
struct Views {
  Strides head;              // a head's (T, hs) slice of q, k or v inside qkv (B, T, 3C)
  Strides head_transposed;   // the same slice read as (hs, T)
  Strides out_head;          // a head's (T, hs) slice of out or dout (B, T, C)
  Strides probs;             // att (B, NH, T, T), dense
  Strides probs_transposed;  // att read as Pᵀ
};

Views views(int64_t T, int64_t C, int64_t NH) {
  const int64_t hs = C / NH;
  return {{T * 3 * C, hs, 3 * C, 1},
          {T * 3 * C, hs, 1, 3 * C},
          {T * C, hs, C, 1},
          {NH * T * T, T * T, T, 1},
          {NH * T * T, T * T, 1, T}};
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

void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T,
                       int C, int NH) {
  const int hs = C / NH;
  const Views v = views(T, C, NH);
  strided_matmul(ctx, att, v.probs, qkv, v.head, qkv + C, v.head_transposed, B, NH, T, T, hs,
                 false);                                                      // S = q kᵀ
  causal_softmax(att, B * NH * T, T, 1.0f / std::sqrt(static_cast<float>(hs)));  // P
  strided_matmul(ctx, out, v.out_head, att, v.probs, qkv + 2 * C, v.head, B, NH, T, hs, T,
                 false);                                                      // y = P v
}

void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const Views v = views(T, C, NH);
  strided_matmul(ctx, datt, v.probs, dout, v.out_head, qkv + 2 * C, v.head_transposed, B, NH, T,
                 T, hs, false);                                               // dP = dy vᵀ
  strided_matmul(ctx, dqkv + 2 * C, v.head, att, v.probs_transposed, dout, v.out_head, B, NH, T,
                 hs, T, false);                                               // dv = Pᵀ dy
  softmax_backward(datt, att, B * NH * T, T, 1.0f / std::sqrt(static_cast<float>(hs)));  // dS
  strided_matmul(ctx, dqkv, v.head, datt, v.probs, qkv + C, v.head, B, NH, T, hs, T,
                 false);                                                      // dq = dS k
  strided_matmul(ctx, dqkv + C, v.head, datt, v.probs_transposed, qkv, v.head, B, NH, T, hs, T,
                 false);                                                      // dk = dSᵀ q
}

// bf16: the same steps, every product on bf16 operands (q, k, v as kept; P, dy and dS rounded).
void attention_forward_bf16(Context& ctx, float* out, float* att, bf16* att_low,
                            const bf16* qkv_low, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const Views v = views(T, C, NH);
  strided_matmul_bf16(ctx, att, v.probs, qkv_low, v.head, qkv_low + C, v.head_transposed, B, NH, T, T, hs,
                      false);                                                 // S = q kᵀ
  causal_softmax(att, B * NH * T, T, 1.0f / std::sqrt(static_cast<float>(hs)));  // P
  store_low(ctx, Precision::bf16, att_low, att, static_cast<size_t>(B) * NH * T * T);
  strided_matmul_bf16(ctx, out, v.out_head, att_low, v.probs, qkv_low + 2 * C, v.head, B, NH, T, hs, T,
                      false);                                                 // y = P v
}

void attention_backward_bf16(Context& ctx, float* dqkv, float* datt, const float* dout,
                             bf16* dout_low, const bf16* qkv_low, const float* att,
                             const bf16* att_low, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const Views v = views(T, C, NH);
  to_bf16(ctx, dout_low, dout, static_cast<size_t>(B) * T * C);
  strided_matmul_bf16(ctx, datt, v.probs, dout_low, v.out_head, qkv_low + 2 * C, v.head_transposed, B, NH,
                      T, T, hs, false);                                       // dP = dy vᵀ
  strided_matmul_bf16(ctx, dqkv + 2 * C, v.head, att_low, v.probs_transposed, dout_low, v.out_head, B, NH,
                      T, hs, T, false);                                       // dv = Pᵀ dy
  softmax_backward(datt, att, B * NH * T, T, 1.0f / std::sqrt(static_cast<float>(hs)));  // dS
  const bf16* ds = narrow_in_place(ctx, Precision::bf16, datt, static_cast<size_t>(B) * NH * T * T);
  strided_matmul_bf16(ctx, dqkv, v.head, ds, v.probs, qkv_low + C, v.head, B, NH, T, hs, T,
                      false);                                                 // dq = dS k
  strided_matmul_bf16(ctx, dqkv + C, v.head, ds, v.probs_transposed, qkv_low, v.head, B, NH, T, hs, T,
                      false);                                                 // dk = dSᵀ q
}

}  // namespace trident::kernels
