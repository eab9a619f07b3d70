// What the two CUDA flash attention files share (flash_attention.cu: the operations and the
// first-light warp kernels; flash_attention_mma.cu: the tiled tensor-core kernels for 16-bit
// operands): where one head's rows of a block are, and the tiled kernels' entry points.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <optional>

#include "kernels/common/low16.hpp"
#include "kernels/cuda/cuda.hpp"

namespace trident::kernels::cuda {

// The element types of q, k and v as the kernels read them: f32, or a 16-bit model's kept values.
__device__ inline float widen_value(float x) { return x; }
__device__ inline float widen_value(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float widen_value(__half x) { return __half2float(x); }

// The rows of a block (ring attention, kernels::AttentionBlock; the whole sequence is the block of
// one chunk) for NH query heads over KV key/value heads (query head h reads key/value head
// kv_head(h) = h / (NH / KV): grouped-query attention; KV = NH multi-head): queries t in [0, n) at
// sequence rows q0 + t of the fused (B, T, C + 2·Ckv) activation (Ckv = KV·hs), keys and values
// s in [0, n) at rows k0 + s of kv (B, T, W) — columns W − 2·Ckv and W − Ckv —, the output rows
// of (B, T, C), the statistics of (B, NH, T). causal: s ≤ t. q, k and v are of the element type
// `values` (the kernels' E); y is f32 or (y_low) of that 16-bit type. gradients_low: backward of
// the whole sequence alone, dqkv's copy in that 16-bit type, or null.
struct HeadRows {
  const void* qkv;
  const void* kv;
  int T, C, hs, NH, KV, W, q0, k0, n;
  bool causal;
  Precision values;
  bool y_low;
  low16* gradients_low = nullptr;
  __host__ __device__ int Ckv() const { return KV * hs; }  // the key (or value) heads' columns
  __host__ __device__ int group() const { return NH / KV; }  // query heads per key/value head
  __device__ int kv_head(int h) const { return h / group(); }
  template <class E>
  __device__ const E* q(int b, int h, int t) const { return static_cast<const E*>(qkv) + q_offset(b, h, t); }
  // Key/value head g's key row s (its value row: Ckv() further).
  __device__ size_t k_offset(int b, int g, int s) const {
    return (size_t(b) * T + k0 + s) * W + (W - 2 * Ckv()) + g * hs;
  }
  template <class E>
  __device__ const E* k(int b, int g, int s) const { return static_cast<const E*>(kv) + k_offset(b, g, s); }
  __device__ size_t row(int b, int h, int t) const { return (size_t(b) * T + q0 + t) * C + h * hs; }
  __device__ size_t q_offset(int b, int h, int t) const {
    return (size_t(b) * T + q0 + t) * (C + 2 * size_t(Ckv())) + h * hs;
  }
  __device__ size_t stat(int b, int h, int t) const { return (size_t(b) * NH + h) * T + q0 + t; }
  __device__ int key_end(int t) const { return causal ? t + 1 : n; }      // keys a query sees: [0, key_end)
  __device__ int query_begin(int s) const { return causal ? s : 0; }    // queries a key is seen by: [query_begin, n)
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(hs)); }  // of the scores: 1/√hs
  // Element i of y, and writing it (16-bit: rounded to nearest even, as store rounds).
  __device__ float y_at(const void* out, size_t i) const {
    if (!y_low) return static_cast<const float*>(out)[i];
    const low16 bits = static_cast<const low16*>(out)[i];
    return values == Precision::fp16 ? fp16_widen(bits) : bf16_widen(bits);
  }
  __device__ void set_y(void* out, size_t i, float value) const {
    if (!y_low) static_cast<float*>(out)[i] = value;
    else static_cast<low16*>(out)[i] = rounded(value);
  }
  // Element i of a gradient, final: written, and where there is one its 16-bit copy (what the qkv
  // GEMM's backward reads: no pass narrows dqkv).
  __device__ void set_gradient(float* gradients, size_t i, float value) const {
    gradients[i] = value;
    if (gradients_low != nullptr) gradients_low[i] = rounded(value);
  }
  __device__ low16 rounded(float value) const {
    return values == Precision::fp16 ? fp16_round(value) : bf16_round(value);
  }
};

// launch(E{}) with E the element type of `values`.
template <class Launch>
void with_values(Precision values, Launch&& launch) {
  if (values == Precision::bf16) launch(__nv_bfloat16{});
  else if (values == Precision::fp16) launch(__half{});
  else launch(float{});
}

// The tiled kernels take heads of these sizes whose values are of the 16-bit operand type
// (ctx.attention_operands bf16 or fp16, q, k and v stored in it); anything else runs on the warp
// kernels.
bool mma_attention_takes(int hs, Precision operands, Precision values);
// As flash_attention.cu's forward and backward (combine: fold into out and lse; accumulate: +=).
void mma_attention_forward(Context& ctx, void* out, float* lse, const HeadRows& rows, int B, bool combine);
void mma_attention_backward(Context& ctx, float* dqkv, float* dkv, const float* dout, const void* out,
                            const float* lse, const HeadRows& rows, int B, bool accumulate);
// The whole causal sequence of these rows as cuDNN's fused attention takes it, or nothing where
// the rows are a ring attention's block or f32 values (cuda.hpp's cudnn_attention_*).
std::optional<FusedAttention> fused_attention(const HeadRows& rows, int B);

}  // namespace trident::kernels::cuda
