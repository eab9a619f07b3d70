// Token and position embeddings, forward and backward. The backward kernels give each gradient
// entry one thread that adds its contributions in position order (no atomics): the CPU's order,
// so the same sums.
#include "kernels/common/low16.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

__device__ inline float widen_element(float x) { return x; }
template <bool fp16>
struct Low16 {
  uint16_t bits;
};
template <bool fp16>
__device__ inline float widen_element(Low16<fp16> x) { return low16_widen<fp16>(x.bits); }

// out (B·T, C) = wte[token − vocab_begin] widened, 0 outside the slice
template <class Element>
__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const Element* wte, int vocab_begin,
                                         int rows, size_t n, int C) {
  FOR_EACH_ELEMENT(i, n) {
    const int row = slice_column(tokens[i / C], vocab_begin, rows);
    out[i] = row < 0 ? 0.0f : widen_element(wte[static_cast<size_t>(row) * C + i % C]);
  }
}

template <class Element>
void launch_embedding_forward(Context& ctx, float* out, const int32_t* tokens, const Element* wte, int vocab_begin,
                              int rows, int B, int T, int C) {
  const size_t n = static_cast<size_t>(B) * T * C;
  if (n == 0) return;
  embedding_forward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, tokens, wte, vocab_begin, rows, n, C);
  check_launch("embedding_forward");
}

// out (B, T, C) += wpe[t]
__global__ void positions_forward_kernel(float* out, const float* wpe, size_t n, int T, int C) {
  FOR_EACH_ELEMENT(i, n) out[i] += wpe[i % (static_cast<size_t>(T) * C)];
}

// dwte (rows, C) += dout at the slice's tokens: one thread per (channel, range of rows) adds the
// positions whose token is in its range, in position order — each entry the CPU's sum, with
// kRowRanges times the threads of one per channel.
constexpr int kRowRanges = 16;
__global__ void embedding_backward_kernel(float* dwte, const float* dout, const int32_t* tokens, int vocab_begin,
                                          int rows, int positions, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, range = blockIdx.y;
  if (c >= C) return;
  const int per_range = (rows + kRowRanges - 1) / kRowRanges;
  const int first = range * per_range, last = min(rows, first + per_range);
  for (int n = 0; n < positions; ++n) {
    const int row = slice_column(tokens[n], vocab_begin, rows);
    if (row >= first && row < last) dwte[static_cast<size_t>(row) * C + c] += dout[static_cast<size_t>(n) * C + c];
  }
}

// dwpe (T, C) += Σ_b dout[b, t]: one thread per (t, c), batches in order.
__global__ void positions_backward_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const size_t TC = static_cast<size_t>(T) * C;
  FOR_EACH_ELEMENT(i, TC) {
    float sum = dwpe[i];
    for (int b = 0; b < B; ++b) sum += dout[b * TC + i];
    dwpe[i] = sum;
  }
}

}  // namespace

void embedding_forward(Context& ctx, float* out, const int32_t* tokens, const float* wte, int vocab_begin, int rows,
                       int B, int T, int C) {
  launch_embedding_forward(ctx, out, tokens, wte, vocab_begin, rows, B, T, C);
}

void embedding_forward_low16(Context& ctx, Precision precision, float* out, const int32_t* tokens, const low16* wte,
                             int vocab_begin, int rows, int B, int T, int C) {
  with_type(precision, [&](auto fp16) {
    using Table = Low16<decltype(fp16)::value>;
    launch_embedding_forward(ctx, out, tokens, reinterpret_cast<const Table*>(wte), vocab_begin, rows, B, T, C);
  });
}

void positions_forward(Context& ctx, float* out, const float* wpe, int B, int T, int C) {
  const size_t n = static_cast<size_t>(B) * T * C;
  if (n == 0) return;
  positions_forward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, wpe, n, T, C);
  check_launch("positions_forward");
}

void embedding_backward(Context& ctx, float* dwte, const float* dout, const int32_t* tokens, int vocab_begin,
                        int rows, int B, int T, int C) {
  if (C == 0 || B * T == 0) return;
  embedding_backward_kernel<<<dim3(blocks_for(C, 64), kRowRanges), 64, 0, stream_of(ctx)>>>(dwte, dout, tokens,
                                                                                             vocab_begin, rows, B * T, C);
  check_launch("embedding_backward");
}

void positions_backward(Context& ctx, float* dwpe, const float* dout, int B, int T, int C) {
  const size_t n = static_cast<size_t>(T) * C;
  if (n == 0) return;
  positions_backward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dwpe, dout, B, T, C);
  check_launch("positions_backward");
}

}  // namespace trident::kernels::cuda
