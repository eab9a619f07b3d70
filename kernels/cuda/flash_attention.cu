// Memory-efficient causal attention on the device, as the CPU's (kernels/cpu/flash_attention.cpp):
// no T×T buffer, the probabilities recomputed in backward from each query's log-sum-exp.
//
// First-light kernels, written for correctness and a memory footprint of O(B·NH·T), not yet for
// speed: one warp per query row (forward, dq) or key row (dk, dv), each lane holding hs/32 of the
// row's channels in registers, the dot products reduced across the warp in a fixed shuffle tree
// (the same sums every run). The tiled kernel with shared-memory tiles, or cuDNN's fused
// attention, replaces them on the way to issue 32's step-time target.
//
// Forward, per query t, over the keys s ≤ t (scale = 1/√hs):
//   S = q·k_s·scale;  m' = max(m, S);  l = l·e^(m−m') + e^(S−m');  acc = acc·e^(m−m') + e^(S−m')·v_s
//   y = acc / l;  L = m + log l
// Backward, with P = e^(q·k·scale − L), D_t = dy_t·y_t and dS = P (dy_t·v_s − D_t):
//   dv_s = Σ_t P dy_t;  dk_s = Σ_t dS·scale q_t  (t ≥ s);   dq_t = Σ_s dS·scale k_s  (s ≤ t)
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/math.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 8;  // channels per lane: heads of up to 256 channels

// One head's rows inside the fused (B, T, 3C) activation and the (B, T, C) output.
struct HeadRows {
  const float* qkv;
  int T, C, hs, NH;
  __device__ const float* q(int b, int h, int t) const { return qkv + (size_t(b) * T + t) * 3 * C + h * hs; }
  __device__ size_t row(int b, int h, int t) const { return (size_t(b) * T + t) * C + h * hs; }
  __device__ size_t stat(int b, int h, int t) const { return (size_t(b) * NH + h) * T + t; }
};

// The warp's row: this lane's channels of x (lane, lane + 32, ...), zero past hs.
__device__ inline void load(float (&into)[kMaxPerLane], const float* x, int hs, int lane) {
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    into[i] = d < hs ? x[d] : 0.0f;
  }
}

__device__ inline float warp_dot(const float (&a)[kMaxPerLane], const float* b, int hs, int lane) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) sum += a[i] * b[d];
  }
  return warp_reduce(sum, SumOp{});
}

// (b, h, position) of the warp's row, or false past the last.
__device__ inline bool warp_row(int B, int NH, int T, int& b, int& h, int& t) {
  const size_t index = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (index >= size_t(B) * NH * T) return false;
  t = static_cast<int>(index % T);
  h = static_cast<int>(index / T % NH);
  b = static_cast<int>(index / (size_t(T) * NH));
  return true;
}

__global__ void forward_kernel(float* out, float* lse, HeadRows rows, int B, float scale) {
  int b, h, t;
  if (!warp_row(B, rows.NH, rows.T, b, h, t)) return;
  const int lane = threadIdx.x % 32, hs = rows.hs, C = rows.C;
  float q[kMaxPerLane], acc[kMaxPerLane] = {};
  load(q, rows.q(b, h, t), hs, lane);
  float m = -INFINITY, l = 0.0f;
  for (int s = 0; s <= t; ++s) {
    const float* k = rows.q(b, h, s) + C;
    const float score = warp_dot(q, k, hs, lane) * scale;
    const float m_new = fmaxf(m, score), correction = vexp(m - m_new), p = vexp(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * correction + (d < hs ? p * k[C + d] : 0.0f);  // k + C: v
    }
    m = m_new;
  }
  float* y = out + rows.row(b, h, t);
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) y[d] = acc[i] / l;
  }
  if (lane == 0) lse[rows.stat(b, h, t)] = m + logf(l);
}

// One warp per key s: dk_s and dv_s, over the queries t ≥ s.
__global__ void key_gradients_kernel(float* dqkv, const float* dout, const float* out, const float* lse,
                                     HeadRows rows, int B, float scale) {
  int b, h, s;
  if (!warp_row(B, rows.NH, rows.T, b, h, s)) return;
  const int lane = threadIdx.x % 32, hs = rows.hs, C = rows.C;
  float k[kMaxPerLane], v[kMaxPerLane], dk[kMaxPerLane] = {}, dv[kMaxPerLane] = {};
  load(k, rows.q(b, h, s) + C, hs, lane);
  load(v, rows.q(b, h, s) + 2 * C, hs, lane);
  for (int t = s; t < rows.T; ++t) {
    const float* q = rows.q(b, h, t);
    const float* dy = dout + rows.row(b, h, t);
    float dyr[kMaxPerLane];
    load(dyr, dy, hs, lane);
    const float p = vexp(warp_dot(k, q, hs, lane) * scale - lse[rows.stat(b, h, t)]);
    const float d_row = warp_dot(dyr, out + rows.row(b, h, t), hs, lane);
    const float ds = p * (warp_dot(v, dy, hs, lane) - d_row) * scale;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hs) dv[i] += p * dyr[i], dk[i] += ds * q[d];
    }
  }
  float* row = dqkv + (size_t(b) * rows.T + s) * 3 * C + h * hs;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) row[C + d] = dk[i], row[2 * C + d] = dv[i];
  }
}

// One warp per query t: dq_t, over the keys s ≤ t.
__global__ void query_gradients_kernel(float* dqkv, const float* dout, const float* out, const float* lse,
                                       HeadRows rows, int B, float scale) {
  int b, h, t;
  if (!warp_row(B, rows.NH, rows.T, b, h, t)) return;
  const int lane = threadIdx.x % 32, hs = rows.hs, C = rows.C;
  float q[kMaxPerLane], dyr[kMaxPerLane], dq[kMaxPerLane] = {};
  load(q, rows.q(b, h, t), hs, lane);
  const float* dy = dout + rows.row(b, h, t);
  load(dyr, dy, hs, lane);
  const float d_row = warp_dot(dyr, out + rows.row(b, h, t), hs, lane), row_lse = lse[rows.stat(b, h, t)];
  for (int s = 0; s <= t; ++s) {
    const float* k = rows.q(b, h, s) + C;
    const float p = vexp(warp_dot(q, k, hs, lane) * scale - row_lse);
    const float ds = p * (warp_dot(dyr, k + C, hs, lane) - d_row) * scale;  // k + C: v
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hs) dq[i] += ds * k[d];
    }
  }
  float* row = dqkv + (size_t(b) * rows.T + t) * 3 * C + h * hs;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hs) row[d] = dq[i];
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

}  // namespace

void flash_attention_forward(Context& ctx, float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  if (size_t(B) * T * NH == 0) return;
  const int hs = C / NH;
  require_head_size(hs);
  forward_kernel<<<warp_blocks(B, T, NH), 32 * kWarpsPerBlock, 0, stream_of(ctx)>>>(
      out, lse, HeadRows{qkv, T, C, hs, NH}, B, 1.0f / std::sqrt(static_cast<float>(hs)));
  check_launch("flash_attention_forward");
}

void flash_attention_backward(Context& ctx, float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, int B, int T, int C, int NH) {
  if (size_t(B) * T * NH == 0) return;
  const int hs = C / NH;
  require_head_size(hs);
  const HeadRows rows{qkv, T, C, hs, NH};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  key_gradients_kernel<<<warp_blocks(B, T, NH), 32 * kWarpsPerBlock, 0, stream_of(ctx)>>>(dqkv, dout, out, lse, rows,
                                                                                         B, scale);
  check_launch("flash_attention_backward (keys)");
  query_gradients_kernel<<<warp_blocks(B, T, NH), 32 * kWarpsPerBlock, 0, stream_of(ctx)>>>(dqkv, dout, out, lse,
                                                                                           rows, B, scale);
  check_launch("flash_attention_backward (queries)");
}

}  // namespace trident::kernels::cuda
