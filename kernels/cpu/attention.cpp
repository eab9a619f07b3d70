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
// the same steps with bf16 operands (optim.precision = bf16): oneDNN's bf16 matmul, or, widened
// (Context::low16_gemm), the f32 products of the same bf16 values — q, k, v and dy widened into
// the workspace, P and dS rounded in place in f32.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/matmul.hpp"
#include "kernels/common/math.hpp"
#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {
namespace {

// att (rows of T) <- causal softmax of scale · att, in place; entries above the diagonal = 0.
// Its sums vectorized (native: in an order set by the vector width), or in index order (portable).
void causal_softmax(float* att, int rows, int T, float scale, Arithmetic arithmetic) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const int t = r % T;  // query position
    float* p = att + static_cast<size_t>(r) * T;
    float max = -INFINITY;
#pragma omp simd reduction(max : max)
    for (int s = 0; s <= t; ++s) max = p[s] * scale > max ? p[s] * scale : max;
    float sum = 0.0f;
    if (arithmetic == Arithmetic::portable) {
      for (int s = 0; s <= t; ++s) sum += (p[s] = vexp(p[s] * scale - max));
    } else {
#pragma omp simd reduction(+ : sum)
      for (int s = 0; s <= t; ++s) {
        p[s] = vexp(p[s] * scale - max);
        sum += p[s];
      }
    }
    const float inv = 1.0f / sum;
    for (int s = 0; s <= t; ++s) p[s] *= inv;
    for (int s = t + 1; s < T; ++s) p[s] = 0.0f;
  }
}

// datt <- P ⊙ (dP − rowsum(dP ⊙ P)) · scale, in place over dP.
void softmax_backward(float* datt, const float* att, int rows, int T, float scale, Arithmetic arithmetic) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const int t = r % T;
    float* d = datt + static_cast<size_t>(r) * T;
    const float* p = att + static_cast<size_t>(r) * T;
    float dot = 0.0f;
    if (arithmetic == Arithmetic::portable) {
      for (int s = 0; s <= t; ++s) dot += d[s] * p[s];
    } else {
#pragma omp simd reduction(+ : dot)
      for (int s = 0; s <= t; ++s) dot += d[s] * p[s];
    }
    for (int s = 0; s <= t; ++s) d[s] = p[s] * (d[s] - dot) * scale;
    for (int s = t + 1; s < T; ++s) d[s] = 0.0f;
  }
}

// The element `offset` values past `base`, in operands of `type`.
const void* at(const void* base, int64_t offset, OperandType type) {
  return static_cast<const char*>(base) + offset * (type == OperandType::f32 ? sizeof(float) : sizeof(bf16));
}

}  // namespace

void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T,
                       int C, int NH) {
  const AttentionGemms g = attention_gemms(B, T, C, NH, OperandType::f32);
  run_gemm(ctx, g.scores, att, qkv, qkv + C);
  causal_softmax(att, B * NH * T, T, attention_scale(C, NH), ctx.arithmetic);  // P
  run_gemm(ctx, g.values, out, att, qkv + 2 * C);
}

void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att, int B, int T, int C, int NH) {
  const AttentionGemms g = attention_gemms(B, T, C, NH, OperandType::f32);
  run_gemm(ctx, g.dprobs, datt, dout, qkv + 2 * C);
  run_gemm(ctx, g.dvalues, dqkv + 2 * C, att, dout);
  softmax_backward(datt, att, B * NH * T, T, attention_scale(C, NH), ctx.arithmetic);  // dS
  run_gemm(ctx, g.dqueries, dqkv, datt, qkv + C);
  run_gemm(ctx, g.dkeys, dqkv + C, datt, qkv);
}

// bf16: the same steps, every product on bf16 values (q, k, v as kept; P, dy and dS rounded).
void attention_forward_bf16(Context& ctx, float* out, float* att, bf16* att_low,
                            const bf16* qkv_low, int B, int T, int C, int NH) {
  const OperandType type = operand_type(ctx, Precision::bf16);
  const AttentionGemms g = attention_gemms(B, T, C, NH, type);
  const size_t n_qkv = static_cast<size_t>(B) * T * 3 * C, n_att = static_cast<size_t>(B) * NH * T * T;
  const void* qkv = qkv_low;
  if (type == OperandType::f32) {  // widened: q, k, v (B, T, 3C) in f32
    float* qkv32 = widening_workspace(n_qkv);
    from_bf16(ctx, qkv32, qkv_low, n_qkv);
    qkv = qkv32;
  }
  run_gemm(ctx, g.scores, att, qkv, at(qkv, C, type));
  causal_softmax(att, B * NH * T, T, attention_scale(C, NH), ctx.arithmetic);  // P
  store_low(ctx, Precision::bf16, att_low, att, n_att);      // att: P's bf16 values, in f32
  run_gemm(ctx, g.values, out, type == OperandType::f32 ? static_cast<const void*>(att) : att_low, at(qkv, 2 * C, type));
}

void attention_backward_bf16(Context& ctx, float* dqkv, float* datt, const float* dout,
                             bf16* dout_low, const bf16* qkv_low, const float* att,
                             const bf16* att_low, int B, int T, int C, int NH) {
  const OperandType type = operand_type(ctx, Precision::bf16);
  const AttentionGemms g = attention_gemms(B, T, C, NH, type);
  const size_t n_qkv = static_cast<size_t>(B) * T * 3 * C, n_out = static_cast<size_t>(B) * T * C;
  const size_t n_att = static_cast<size_t>(B) * NH * T * T;
  const void *qkv = qkv_low, *dy = dout_low, *probs = att_low;
  if (type == OperandType::f32) {  // widened: q, k, v (B, T, 3C), then dy (B, T, C) rounded, in f32
    float* qkv32 = widening_workspace(n_qkv + n_out);
    from_bf16(ctx, qkv32, qkv_low, n_qkv);
    std::memcpy(qkv32 + n_qkv, dout, n_out * sizeof(float));
    round_low(ctx, Precision::bf16, qkv32 + n_qkv, n_out);
    qkv = qkv32, dy = qkv32 + n_qkv, probs = att;  // att holds P's bf16 values
  } else {
    to_bf16(ctx, dout_low, dout, n_out);
  }
  run_gemm(ctx, g.dprobs, datt, dy, at(qkv, 2 * C, type));
  run_gemm(ctx, g.dvalues, dqkv + 2 * C, probs, dy);
  softmax_backward(datt, att, B * NH * T, T, attention_scale(C, NH), ctx.arithmetic);  // dS
  const void* ds = datt;  // dS rounded to bf16: in place in f32 (widened), or narrowed
  if (type == OperandType::f32) round_low(ctx, Precision::bf16, datt, n_att);
  else ds = narrow_in_place(ctx, Precision::bf16, datt, n_att);
  run_gemm(ctx, g.dqueries, dqkv, ds, at(qkv, C, type));
  run_gemm(ctx, g.dkeys, dqkv + C, ds, qkv);
}

void prepare_attention(Context& ctx, Precision precision, int B, int T, int C, int NH) {
  const OperandType type = precision == Precision::bf16 ? operand_type(ctx, precision) : OperandType::f32;
  const AttentionGemms g = attention_gemms(B, T, C, NH, type);
  for (const Gemm& gemm : {g.scores, g.values, g.dprobs, g.dvalues, g.dqueries, g.dkeys}) prepare_gemm(ctx, gemm);
}

// One position against the cache: dot products, a max-subtracted softmax and the weighted sum
// of values, per head (heads in parallel; each head's sums in position order).
void attention_decode(Context& ctx, float* out, float* scores, const float* q, const float* keys,
                      const float* values, int positions, int C, int W, int NH) {
  const int hs = C / NH, group = NH / (W / hs);  // query heads per key/value head
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int h = 0; h < NH; ++h) {
    float* s = scores + static_cast<size_t>(h) * positions;
    float max = -INFINITY;
    for (int t = 0; t < positions; ++t) {
      const float* k = keys + static_cast<size_t>(t) * W + h / group * hs;
      float dot = 0.0f;
      for (int d = 0; d < hs; ++d) dot += q[h * hs + d] * k[d];
      s[t] = dot * scale;
      max = std::max(max, s[t]);
    }
    float sum = 0.0f;
    for (int t = 0; t < positions; ++t) sum += (s[t] = std::exp(s[t] - max));
    float* y = out + static_cast<size_t>(h) * hs;
    std::fill(y, y + hs, 0.0f);
    for (int t = 0; t < positions; ++t) {
      const float p = s[t] / sum;
      const float* v = values + static_cast<size_t>(t) * W + h / group * hs;
      for (int d = 0; d < hs; ++d) y[d] += p * v[d];
    }
  }
}

}  // namespace trident::kernels::cpu
