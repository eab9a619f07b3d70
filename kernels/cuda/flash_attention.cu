// Memory-efficient causal attention on the device, as the CPU's (kernels/cpu/flash_attention.cpp):
// no T×T buffer, the probabilities recomputed in backward from each query's log-sum-exp.
//
// Two sets of kernels:
// - 16-bit models (ctx.attention_operands bf16 or fp16) with heads of 32, 64 or 128 channels:
//   the tiled tensor-core kernels of flash_attention_mma.cu.
// - Everything else (f32 models, whose products stay f32; other head sizes): the first-light
//   kernels here, written for correctness and a memory footprint of O(B·NH·T), not for speed: one
//   warp per query row (forward, dq) or key row (dk, dv; of a key/value head, over the query heads
//   of its group in turn), each lane holding hs/32 of the row's channels in registers, the dot
//   products reduced across the warp in a fixed shuffle tree (the same sums every run).
// Grouped-query attention's heads are read as they are (HeadRows::kv_head), no expanded copy.
//
// Forward, per query t, over the keys s ≤ t (scale = 1/√hs):
//   S = q·k_s·scale;  m' = max(m, S);  l = l·e^(m−m') + e^(S−m');  acc = acc·e^(m−m') + e^(S−m')·v_s
//   y = acc / l;  L = m + log l
// Backward, with P = e^(q·k·scale − L), D_t = dy_t·y_t and dS = P (dy_t·v_s − D_t):
//   dv_s = Σ_t P dy_t;  dk_s = Σ_t dS·scale q_t  (t ≥ s);   dq_t = Σ_s dS·scale k_s  (s ≤ t)
// q, k and v are read as stored (the kernels' E: f32, or a 16-bit model's kept values widened as
// they are read), y written and read f32 or in that 16-bit type.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/math.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/flash_attention.cuh"

namespace trident::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 8;  // channels per lane: heads of up to 256 channels

// The warp's row: this lane's channels of x (lane, lane + 32, ...), zero past hs.
template <class E>
__device__ inline void load(float (&into)[kMaxPerLane], const E* x, int hs, int lane) {
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    into[i] = d < hs ? widen_value(x[d]) : 0.0f;
  }
}

template <class E>
__device__ inline float warp_dot(const float (&a)[kMaxPerLane], const E* b, int hs, int lane) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) sum += a[i] * widen_value(b[d]);
  }
  return warp_reduce(sum, SumOp{});
}

// D = dy·y of the warp's row (y f32 or 16-bit).
__device__ inline float warp_dot_y(const float (&dy)[kMaxPerLane], const HeadRows& rows, const void* out, size_t row,
                                   int lane) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < rows.hs) sum += dy[i] * rows.y_at(out, row + d);
  }
  return warp_reduce(sum, SumOp{});
}

// (b, h, position) of the warp's row among (B, heads, n), or false past the last.
__device__ inline bool warp_row(int B, int heads, int n, int& b, int& h, int& t) {
  const size_t index = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (index >= size_t(B) * heads * n) return false;
  t = static_cast<int>(index % n);
  h = static_cast<int>(index / n % heads);
  b = static_cast<int>(index / (size_t(n) * heads));
  return true;
}

// combine: fold the row into what out (f32) and lse hold, as the CPU's.
template <class E>
__global__ void forward_kernel(void* out, float* lse, HeadRows rows, int B, float scale, bool combine) {
  int b, h, t;
  if (!warp_row(B, rows.NH, rows.n, b, h, t)) return;
  const int lane = threadIdx.x % 32, hs = rows.hs, Ckv = rows.Ckv(), g = rows.kv_head(h);
  float q[kMaxPerLane], acc[kMaxPerLane] = {};
  load(q, rows.q<E>(b, h, t), hs, lane);
  float m = -INFINITY, l = 0.0f;
  for (int s = 0; s < rows.key_end(t); ++s) {
    const E* k = rows.k<E>(b, g, s);
    const float score = warp_dot(q, k, hs, lane) * scale;
    const float m_new = fmaxf(m, score), correction = vexp(m - m_new), p = vexp(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * correction + (d < hs ? p * widen_value(k[Ckv + d]) : 0.0f);  // k + Ckv: v
    }
    m = m_new;
  }
  const size_t y = rows.row(b, h, t);
  float& row_lse = lse[rows.stat(b, h, t)];
  const float old_lse = row_lse, block_lse = m + logf(l);
  const bool fold = combine;
  const float top = fmaxf(old_lse, block_lse);
  const float merged = fold ? top + logf(vexp(old_lse - top) + vexp(block_lse - top)) : block_lse;
  const float keep = fold ? vexp(old_lse - merged) : 0.0f, add = fold ? vexp(block_lse - merged) / l : 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) {
      if (fold) static_cast<float*>(out)[y + d] = static_cast<float*>(out)[y + d] * keep + acc[i] * add;
      else rows.set_y(out, y + d, acc[i] / l);
    }
  }
  __syncwarp();  // every lane has read the old lse before lane 0 writes the new
  if (lane == 0) row_lse = merged;
}

// One warp per key s of key/value head g: dk_s and dv_s (into dkv, of kv's layout; accumulate:
// +=), over the queries of the group's heads, head by head, that see it.
template <class E>
__global__ void key_gradients_kernel(float* dkv, const float* dout, const void* out, const float* lse,
                                     HeadRows rows, int B, float scale, bool accumulate) {
  int b, g, s;
  if (!warp_row(B, rows.KV, rows.n, b, g, s)) return;
  const int lane = threadIdx.x % 32, hs = rows.hs, Ckv = rows.Ckv();
  float k[kMaxPerLane], v[kMaxPerLane], dk[kMaxPerLane] = {}, dv[kMaxPerLane] = {};
  load(k, rows.k<E>(b, g, s), hs, lane);
  load(v, rows.k<E>(b, g, s) + Ckv, hs, lane);
  for (int h = g * rows.group(); h < (g + 1) * rows.group(); ++h)
    for (int t = rows.query_begin(s); t < rows.n; ++t) {
      const E* q = rows.q<E>(b, h, t);
      const float* dy = dout + rows.row(b, h, t);
      float dyr[kMaxPerLane];
      load(dyr, dy, hs, lane);
      const float p = vexp(warp_dot(k, q, hs, lane) * scale - lse[rows.stat(b, h, t)]);
      const float d_row = warp_dot_y(dyr, rows, out, rows.row(b, h, t), lane);
      const float ds = p * (warp_dot(v, dy, hs, lane) - d_row) * scale;
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < hs) dv[i] += p * dyr[i], dk[i] += ds * widen_value(q[d]);
      }
    }
  const size_t row = rows.k_offset(b, g, s);
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const size_t at = row + lane + 32 * i;
    if (lane + 32 * i < hs) {
      rows.set_gradient(dkv, at, (accumulate ? dkv[at] : 0.0f) + dk[i]);
      rows.set_gradient(dkv, at + Ckv, (accumulate ? dkv[at + Ckv] : 0.0f) + dv[i]);
    }
  }
}

// One warp per query t: dq_t (accumulate: +=), over the keys it sees.
template <class E>
__global__ void query_gradients_kernel(float* dqkv, const float* dout, const void* out, const float* lse,
                                       HeadRows rows, int B, float scale, bool accumulate) {
  int b, h, t;
  if (!warp_row(B, rows.NH, rows.n, b, h, t)) return;
  const int lane = threadIdx.x % 32, hs = rows.hs, Ckv = rows.Ckv(), g = rows.kv_head(h);
  float q[kMaxPerLane], dyr[kMaxPerLane], dq[kMaxPerLane] = {};
  load(q, rows.q<E>(b, h, t), hs, lane);
  const float* dy = dout + rows.row(b, h, t);
  load(dyr, dy, hs, lane);
  const float d_row = warp_dot_y(dyr, rows, out, rows.row(b, h, t), lane), row_lse = lse[rows.stat(b, h, t)];
  for (int s = 0; s < rows.key_end(t); ++s) {
    const E* k = rows.k<E>(b, g, s);
    const float p = vexp(warp_dot(q, k, hs, lane) * scale - row_lse);
    const float ds = p * (warp_dot(dyr, k + Ckv, hs, lane) - d_row) * scale;  // k + Ckv: v
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hs) dq[i] += ds * widen_value(k[d]);
    }
  }
  const size_t row = rows.q_offset(b, h, t);
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const size_t at = row + lane + 32 * i;
    if (lane + 32 * i < hs) rows.set_gradient(dqkv, at, (accumulate ? dqkv[at] : 0.0f) + dq[i]);
  }
}

int warp_blocks(int B, int T, int NH) {
  const size_t warps = size_t(B) * NH * T;
  return static_cast<int>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

void require_head_size(int hs) {
  if (hs > 32 * kMaxPerLane)
    throw std::runtime_error("flash attention on CUDA: heads of " + std::to_string(hs) + " channels, more than the " +
                             std::to_string(32 * kMaxPerLane) + " its kernels hold");
}

HeadRows block_rows(const FlashOperands& in, int T, int C, int NH, const AttentionBlock& block) {
  return HeadRows{in.qkv, in.kv, T, C, C / NH, NH, in.KV, in.W, block.q_chunk * block.rows, block.k_chunk * block.rows,
                  block.rows, block.causal, in.values, in.y_low};
}

}  // namespace

std::optional<FusedAttention> fused_attention(const HeadRows& rows, int B) {
  const bool whole = rows.q0 == 0 && rows.k0 == 0 && rows.n == rows.T && rows.causal &&
                     rows.W == rows.C + 2 * rows.Ckv() && rows.kv == rows.qkv;
  if (!whole || rows.values == Precision::fp32) return std::nullopt;
  return FusedAttention{rows.qkv, B, rows.T, rows.NH, rows.KV, rows.hs, rows.values, rows.scale()};
}

// cuDNN's fused attention where it takes the whole sequence; else the tiled kernels where they
// take the heads and the values; else one warp a row.
void flash_attention_forward(Context& ctx, const FlashOperands& in, void* out, float* lse, int B, int T, int C, int NH,
                             const AttentionBlock& block, bool combine) {
  if (combine && in.y_low) throw std::logic_error("flash attention on CUDA: a block folded into a 16-bit output");
  const HeadRows rows = block_rows(in, T, C, NH, block);
  if (size_t(B) * rows.n * rows.NH == 0) return;
  if (const auto fused = fused_attention(rows, B);
      fused && !combine && in.y_low && cudnn_attention_takes(ctx, *fused) && cudnn_attention_forward(ctx, *fused, out, lse))
    return;
  if (mma_attention_takes(rows.hs, ctx.attention_operands, in.values))
    return mma_attention_forward(ctx, out, lse, rows, B, combine);
  require_head_size(rows.hs);
  with_values(in.values, [&](auto e) {
    forward_kernel<decltype(e)><<<warp_blocks(B, rows.n, rows.NH), 32 * kWarpsPerBlock, 0, stream_of(ctx)>>>(
        out, lse, rows, B, rows.scale(), combine);
  });
  check_launch("flash_attention_forward");
}

// The key kernel writes dk and dv, the query kernel dq: each element of the gradients by one warp.
// dkv may be dqkv (the whole sequence, or a rank's own chunks: W = C + 2·Ckv): the key kernel
// touches its k and v columns, the query kernel its q columns, one launch after the other.
void flash_attention_backward(Context& ctx, const FlashOperands& in, float* dqkv, float* dkv, const float* dout,
                              const void* out, const float* lse, int B, int T, int C, int NH,
                              const AttentionBlock& block, bool accumulate, low16* dqkv_low) {
  if (dqkv_low != nullptr && (accumulate || dkv != dqkv))
    throw std::logic_error("flash attention on CUDA: a 16-bit copy of the gradients of a block");
  HeadRows rows = block_rows(in, T, C, NH, block);
  rows.gradients_low = dqkv_low;
  if (size_t(B) * rows.n * rows.NH == 0) return;
  if (const auto fused = fused_attention(rows, B);
      fused && !accumulate && dkv == dqkv && in.y_low && cudnn_attention_takes(ctx, *fused) &&
      cudnn_attention_backward(ctx, *fused, dqkv, dqkv_low, dout, out, lse))
    return;
  if (mma_attention_takes(rows.hs, ctx.attention_operands, in.values))
    return mma_attention_backward(ctx, dqkv, dkv, dout, out, lse, rows, B, accumulate);
  require_head_size(rows.hs);
  const float scale = rows.scale();
  with_values(in.values, [&](auto e) {
    using E = decltype(e);
    key_gradients_kernel<E><<<warp_blocks(B, rows.n, rows.KV), 32 * kWarpsPerBlock, 0, stream_of(ctx)>>>(
        dkv, dout, out, lse, rows, B, scale, accumulate);
    check_launch("flash_attention_backward (keys)");
    query_gradients_kernel<E><<<warp_blocks(B, rows.n, rows.NH), 32 * kWarpsPerBlock, 0, stream_of(ctx)>>>(
        dqkv, dout, out, lse, rows, B, scale, accumulate);
    check_launch("flash_attention_backward (queries)");
  });
}

}  // namespace trident::kernels::cuda
