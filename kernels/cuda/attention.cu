// Causal multi-head self-attention on the device, as the CPU backend's (kernels/cpu/attention.cpp):
// the six products per head are cuBLASLt GEMMs over the (B, NH) grid that read q, k, v straight
// out of the fused qkv activation (strided views, no permute copies), and the causal softmax
// and its backward are row kernels (one thread block per row of P) on the arithmetic shared with
// the CPU tests (kernels/common/rows.hpp). The probabilities att (B, NH, T, T) are kept, as the
// operations' contract says (a fused kernel that does not keep them is not written yet).
//
// Forward, per (b, h):  S = q kᵀ · 1/√hs;  P = softmax_causal(S);  y = P v
// Backward:             dP = dy vᵀ;  dv = Pᵀ dy;  dS = P ⊙ (dP − rowsum(dP ⊙ P)) · 1/√hs;
//                       dq = dS k;  dk = dSᵀ q
#include <cmath>

#include "kernels/common/gemm_shapes.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;

// One block per row of att (rows of T, query position t = row mod T): the causal softmax of
// scale · S in place, entries above the diagonal 0.
__global__ void causal_softmax_kernel(float* att, int T, float scale) {
  const size_t row = blockIdx.x;
  const int t = static_cast<int>(row % T);
  float* p = att + row * T;
  float max = -INFINITY;
  for (int s = threadIdx.x; s <= t; s += blockDim.x) max = p[s] * scale > max ? p[s] * scale : max;
  max = block_max(max);
  float sum = 0.0f;
  for (int s = threadIdx.x; s <= t; s += blockDim.x) sum += (p[s] = softmax_numerator(p[s], scale, max));
  const float inv = 1.0f / block_sum(sum);
  for (int s = threadIdx.x; s < T; s += blockDim.x) p[s] = s <= t ? p[s] * inv : 0.0f;
}

// One block per row: datt ← P ⊙ (dP − rowsum(dP ⊙ P)) · scale in place over dP.
__global__ void softmax_backward_kernel(float* datt, const float* att, int T, float scale) {
  const size_t row = blockIdx.x;
  const int t = static_cast<int>(row % T);
  float* d = datt + row * T;
  const float* p = att + row * T;
  float dot = 0.0f;
  for (int s = threadIdx.x; s <= t; s += blockDim.x) dot += d[s] * p[s];
  dot = block_sum(dot);
  for (int s = threadIdx.x; s < T; s += blockDim.x) d[s] = s <= t ? softmax_gradient(p[s], d[s], dot, scale) : 0.0f;
}

void causal_softmax(Context& ctx, float* att, int rows, int T, float scale) {
  if (rows == 0) return;
  causal_softmax_kernel<<<rows, kRowThreads, 0, stream_of(ctx)>>>(att, T, scale);
  check_launch("causal_softmax");
}

void softmax_backward(Context& ctx, float* datt, const float* att, int rows, int T, float scale) {
  if (rows == 0) return;
  softmax_backward_kernel<<<rows, kRowThreads, 0, stream_of(ctx)>>>(datt, att, T, scale);
  check_launch("softmax_backward");
}

// One block per head: scores against every cached position, their softmax, the weighted sum of
// values (each output element summed over positions in order).
__global__ void decode_kernel(float* out, float* scores, const float* q, const float* keys, const float* values,
                              int positions, int W, int hs, int group, float scale) {
  const int h = blockIdx.x, kv = h / group * hs;  // this head's key/value columns
  float* s = scores + static_cast<size_t>(h) * positions;
  const float* qh = q + h * hs;
  float max = -INFINITY;
  for (int t = threadIdx.x; t < positions; t += blockDim.x) {
    const float* k = keys + static_cast<size_t>(t) * W + kv;
    float dot = 0.0f;
    for (int d = 0; d < hs; ++d) dot += qh[d] * k[d];
    s[t] = dot * scale;
    max = s[t] > max ? s[t] : max;
  }
  max = block_max(max);
  float sum = 0.0f;
  for (int t = threadIdx.x; t < positions; t += blockDim.x) sum += (s[t] = expf(s[t] - max));
  sum = block_sum(sum);  // its barrier also publishes every s[t] to the block
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    float y = 0.0f;
    for (int t = 0; t < positions; ++t) y += s[t] / sum * values[static_cast<size_t>(t) * W + kv + d];
    out[h * hs + d] = y;
  }
}

}  // namespace

void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const AttentionGemms g = attention_gemms(B, T, C, NH, OperandType::f32);
  run_gemm(ctx, g.scores, att, qkv, qkv + C);
  causal_softmax(ctx, att, B * NH * T, T, attention_scale(C, NH));  // P
  run_gemm(ctx, g.values, out, att, qkv + 2 * C);
}

void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH) {
  const AttentionGemms g = attention_gemms(B, T, C, NH, OperandType::f32);
  run_gemm(ctx, g.dprobs, datt, dout, qkv + 2 * C);
  run_gemm(ctx, g.dvalues, dqkv + 2 * C, att, dout);
  softmax_backward(ctx, datt, att, B * NH * T, T, attention_scale(C, NH));  // dS
  run_gemm(ctx, g.dqueries, dqkv, datt, qkv + C);
  run_gemm(ctx, g.dkeys, dqkv + C, datt, qkv);
}

// bf16: the same steps, every product on bf16 values (q, k, v as kept; P, dy and dS rounded).
void attention_forward_bf16(Context& ctx, float* out, float* att, bf16* att_low, const bf16* qkv_low, int B, int T,
                            int C, int NH) {
  const AttentionGemms g = attention_gemms(B, T, C, NH, OperandType::bf16);
  const size_t n_att = static_cast<size_t>(B) * NH * T * T;
  run_gemm(ctx, g.scores, att, qkv_low, qkv_low + C);
  causal_softmax(ctx, att, B * NH * T, T, attention_scale(C, NH));  // P
  store_low(ctx, Precision::bf16, att_low, att, n_att);            // att: P's bf16 values, in f32
  run_gemm(ctx, g.values, out, att_low, qkv_low + 2 * C);
}

void attention_backward_bf16(Context& ctx, float* dqkv, float* datt, const float* dout, bf16* dout_low,
                             const bf16* qkv_low, const float* att, const bf16* att_low, int B, int T, int C, int NH) {
  const AttentionGemms g = attention_gemms(B, T, C, NH, OperandType::bf16);
  const size_t n_out = static_cast<size_t>(B) * T * C, n_att = static_cast<size_t>(B) * NH * T * T;
  to_low(ctx, Precision::bf16, dout_low, dout, n_out);
  run_gemm(ctx, g.dprobs, datt, dout_low, qkv_low + 2 * C);
  run_gemm(ctx, g.dvalues, dqkv + 2 * C, att_low, dout_low);
  softmax_backward(ctx, datt, att, B * NH * T, T, attention_scale(C, NH));  // dS
  const low16* ds = narrow_in_place(ctx, Precision::bf16, datt, n_att);   // dS rounded to bf16, in place
  run_gemm(ctx, g.dqueries, dqkv, ds, qkv_low + C);
  run_gemm(ctx, g.dkeys, dqkv + C, ds, qkv_low);
}

void prepare_attention(Context& ctx, Precision precision, int B, int T, int C, int NH) {
  const OperandType type = precision == Precision::bf16 ? OperandType::bf16 : OperandType::f32;
  const AttentionGemms g = attention_gemms(B, T, C, NH, type);
  for (const Gemm& gemm : {g.scores, g.values, g.dprobs, g.dvalues, g.dqueries, g.dkeys}) prepare_gemm(gemm);
}

void attention_decode(Context& ctx, float* out, float* scores, const float* q, const float* keys, const float* values,
                      int positions, int C, int W, int NH) {
  if (NH == 0 || positions == 0) return;
  const int hs = C / NH;
  decode_kernel<<<NH, kRowThreads, 0, stream_of(ctx)>>>(out, scores, q, keys, values, positions, W, hs,
                                                        NH / (W / hs), attention_scale(C, NH));
  check_launch("attention_decode");
}

}  // namespace trident::kernels::cuda
