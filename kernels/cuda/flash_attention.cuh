// What the two CUDA flash attention files share (flash_attention.cu: the operations and the
// first-light warp kernels; flash_attention_mma.cu: the tiled tensor-core kernels for 16-bit
// operands): where one head's rows of a block are, and the tiled kernels' entry points.
#pragma once

#include <cmath>

#include "kernels/cuda/cuda.hpp"

namespace trident::kernels::cuda {

// One head's rows of a block (ring attention, kernels::AttentionBlock; the whole sequence is the
// block of one chunk): queries t in [0, n) at sequence rows q0 + t of the fused (B, T, 3C)
// activation, keys and values s in [0, n) at rows k0 + s of kv (B, T, W) — columns W − 2C and
// W − C —, the output rows of (B, T, C), the statistics of (B, NH, T). causal: s ≤ t.
struct HeadRows {
  const float* qkv;
  const float* kv;
  int T, C, hs, NH, W, q0, k0, n;
  bool causal;
  __device__ const float* q(int b, int h, int t) const { return qkv + (size_t(b) * T + q0 + t) * 3 * C + h * hs; }
  __device__ size_t k_offset(int b, int h, int s) const { return (size_t(b) * T + k0 + s) * W + (W - 2 * C) + h * hs; }
  __device__ const float* k(int b, int h, int s) const { return kv + k_offset(b, h, s); }
  __device__ size_t row(int b, int h, int t) const { return (size_t(b) * T + q0 + t) * C + h * hs; }
  __device__ size_t q_offset(int b, int h, int t) const { return (size_t(b) * T + q0 + t) * 3 * C + h * hs; }
  __device__ size_t stat(int b, int h, int t) const { return (size_t(b) * NH + h) * T + q0 + t; }
  __device__ int key_end(int t) const { return causal ? t + 1 : n; }      // keys a query sees: [0, key_end)
  __device__ int query_begin(int s) const { return causal ? s : 0; }    // queries a key is seen by: [query_begin, n)
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(hs)); }  // of the scores: 1/√hs
};

// The tiled kernels take heads of these sizes with 16-bit operands (ctx.attention_operands bf16
// or fp16); anything else runs on the warp kernels.
bool mma_attention_takes(int hs, Precision operands);
// As flash_attention.cu's forward and backward (combine: fold into out and lse; accumulate: +=).
void mma_attention_forward(Context& ctx, float* out, float* lse, const HeadRows& rows, int B, bool combine);
void mma_attention_backward(Context& ctx, float* dqkv, float* dkv, const float* dout, const float* out,
                            const float* lse, const HeadRows& rows, int B, bool accumulate);

}  // namespace trident::kernels::cuda
