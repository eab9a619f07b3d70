// LayerNorm, forward and backward: one thread block per row for the row's statistics and its
// input gradient (block reductions in a fixed order), and the parameter gradients as column sums
// in two passes (chunks of rows in order, then the chunks in order: deterministic, no atomics). The per-element
// arithmetic is kernels/common/rows.hpp's, shared with the CPU tests. Outputs as the CPU's:
// out, mean and variance overwritten; dinp, dweight, dbias accumulated.
#include "kernels/common/rows.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;

// One block per row: mean and biased variance (two passes over the row), then the normalized row
// (Out: F32Out or Low16Out).
template <class Out>
__global__ void layernorm_forward_kernel(Out out, float* mean, float* variance, const float* inp,
                                         const float* weight, const float* bias, int C) {
  const size_t row = blockIdx.x;
  const float* x = inp + row * C;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) sum += x[c];
  const float m = block_sum(sum) / C;
  float squares = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) squares += (x[c] - m) * (x[c] - m);
  const float var = block_sum(squares) / C;
  const float rstd = layernorm_rstd(var);
  for (int c = threadIdx.x; c < C; c += blockDim.x) out(row * C + c, layernorm_value(x[c], m, rstd, weight[c], bias[c]));
  if (threadIdx.x == 0) mean[row] = m, variance[row] = var;
}

// One block per row: dinp += rstd (dx̂ − mean(dx̂) − x̂ mean(dx̂ x̂)). In: the input's reader; Copy:
// where the sum's 16-bit copy goes (NoCopy or Low16Out).
template <class In, class Copy>
__global__ void layernorm_input_gradient_kernel(float* dinp, Copy copy, const float* dout, In inp, const float* weight,
                                                const float* mean, const float* variance, int C) {
  const size_t row = blockIdx.x;
  const auto x = [&](int c) { return inp[row * C + c]; };
  const float* dy = dout + row * C;
  const float m = mean[row], rstd = layernorm_rstd(variance[row]);
  float dxhat_sum = 0.0f, dxhat_xhat_sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float dxhat = dy[c] * weight[c];
    dxhat_sum += dxhat;
    dxhat_xhat_sum += dxhat * (x(c) - m) * rstd;
  }
  const float mean_dxhat = block_sum(dxhat_sum) / C;
  const float mean_dxhat_xhat = block_sum(dxhat_xhat_sum) / C;
  float* dx = dinp + row * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    dx[c] += layernorm_input_gradient(dy[c], weight[c], (x(c) - m) * rstd, rstd, mean_dxhat, mean_dxhat_xhat);
    copy(row * C + c, dx[c]);
  }
}

// Per chunk of rows and channel, in row order: partial_dw[chunk, c] = Σ dout · x̂,
// partial_db[chunk, c] = Σ dout (the chunks then summed in order: add_chunk_sums).
template <class In>
__global__ void layernorm_parameter_chunks_kernel(float* partial_dw, float* partial_db, const float* dout, In inp,
                                                  const float* mean, const float* variance, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (c >= C) return;
  const int end = min(N, (chunk + 1) * kColumnChunk);
  float dw = 0.0f, db = 0.0f;
  for (int row = chunk * kColumnChunk; row < end; ++row) {
    const size_t at = static_cast<size_t>(row) * C + c;
    dw += dout[at] * (inp[at] - mean[row]) * layernorm_rstd(variance[row]);
    db += dout[at];
  }
  partial_dw[static_cast<size_t>(chunk) * C + c] = dw;
  partial_db[static_cast<size_t>(chunk) * C + c] = db;
}

}  // namespace

void layernorm_forward(Context& ctx, float* out, float* mean, float* variance, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
  if (N == 0 || C == 0) return;
  layernorm_forward_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(F32Out{out}, mean, variance, inp, weight, bias, C);
  check_launch("layernorm_forward");
}

void layernorm_forward_low16(Context& ctx, Precision precision, low16* out, float* mean, float* variance,
                             const float* inp, const float* weight, const float* bias, int N, int C) {
  if (N == 0 || C == 0) return;
  with_type(precision, [&](auto fp16) {
    layernorm_forward_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(Low16Out<decltype(fp16)::value>{out}, mean,
                                                                      variance, inp, weight, bias, C);
  });
  check_launch("layernorm_forward");
}

namespace {

// inp f32 (precision fp32) or of precision's 16-bit type; dinp_low (or null) of copy_type.
void backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout, Precision precision,
              const void* inp, const float* weight, const float* mean, const float* variance, int N, int C,
              Precision copy_type, low16* dinp_low) {
  if (N == 0 || C == 0) return;
  const int chunks = column_chunks(N);
  float* partial = stream_scratch(ctx, 2 * static_cast<size_t>(chunks) * C, "cudaMallocAsync (layernorm_backward)");
  float* partial_db = partial + static_cast<size_t>(chunks) * C;
  with_input(precision, inp, [&](auto x) {
    with_copy(copy_type, dinp_low, [&](auto copy) {
      layernorm_input_gradient_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(dinp, copy, dout, x, weight, mean,
                                                                              variance, C);
    });
    check_launch("layernorm_backward (input)");
    layernorm_parameter_chunks_kernel<<<dim3(blocks_for(C), chunks), kThreads, 0, stream_of(ctx)>>>(
        partial, partial_db, dout, x, mean, variance, N, C);
    check_launch("layernorm_backward (parameters)");
  });
  add_chunk_sums(ctx, dweight, partial, chunks, C);
  add_chunk_sums(ctx, dbias, partial_db, chunks, C);
  release_scratch(ctx, partial);
}

}  // namespace

void layernorm_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* bias, const float* mean,
                        const float* variance, int N, int C, Precision copy_type, low16* dinp_low) {
  backward(ctx, dinp, dweight, dbias, dout, Precision::fp32, inp, weight, mean, variance, N, C, copy_type, dinp_low);
}

void layernorm_backward_low16(Context& ctx, Precision precision, float* dinp, float* dweight, float* dbias,
                              const float* dout, const low16* inp, const float* weight, const float* bias,
                              const float* mean, const float* variance, int N, int C, low16* dinp_low) {
  backward(ctx, dinp, dweight, dbias, dout, precision, inp, weight, mean, variance, N, C, precision, dinp_low);
}

}  // namespace trident::kernels::cuda
