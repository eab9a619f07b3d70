// LayerNorm, forward and backward: one thread block per row for the row's statistics and its
// input gradient (block reductions in a fixed order), and one thread per channel for the
// parameter gradients (rows summed in order: deterministic, no atomics). The per-element
// arithmetic is kernels/common/rows.hpp's, shared with the CPU tests. Outputs as the CPU's:
// out, mean and variance overwritten; dinp, dweight, dbias accumulated.
#include "kernels/common/rows.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;

// One block per row: mean and biased variance (two passes over the row), then the normalized row.
__global__ void layernorm_forward_kernel(float* out, float* mean, float* variance, const float* inp,
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
  float* y = out + row * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) y[c] = layernorm_value(x[c], m, rstd, weight[c], bias[c]);
  if (threadIdx.x == 0) mean[row] = m, variance[row] = var;
}

// One block per row: dinp += rstd (dx̂ − mean(dx̂) − x̂ mean(dx̂ x̂)).
__global__ void layernorm_input_gradient_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean, const float* variance,
                                                int C) {
  const size_t row = blockIdx.x;
  const float* x = inp + row * C;
  const float* dy = dout + row * C;
  const float m = mean[row], rstd = layernorm_rstd(variance[row]);
  float dxhat_sum = 0.0f, dxhat_xhat_sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float dxhat = dy[c] * weight[c];
    dxhat_sum += dxhat;
    dxhat_xhat_sum += dxhat * (x[c] - m) * rstd;
  }
  const float mean_dxhat = block_sum(dxhat_sum) / C;
  const float mean_dxhat_xhat = block_sum(dxhat_xhat_sum) / C;
  float* dx = dinp + row * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    dx[c] += layernorm_input_gradient(dy[c], weight[c], (x[c] - m) * rstd, rstd, mean_dxhat, mean_dxhat_xhat);
}

// One thread per channel: dweight[c] += Σ_rows dout · x̂, dbias[c] += Σ_rows dout, rows in order.
__global__ void layernorm_parameter_gradient_kernel(float* dweight, float* dbias, const float* dout,
                                                    const float* inp, const float* mean, const float* variance,
                                                    int N, int C) {
  FOR_EACH_ELEMENT(c, static_cast<size_t>(C)) {
    float dw = 0.0f, db = 0.0f;
    for (int row = 0; row < N; ++row) {
      const size_t at = static_cast<size_t>(row) * C + c;
      dw += dout[at] * (inp[at] - mean[row]) * layernorm_rstd(variance[row]);
      db += dout[at];
    }
    dweight[c] += dw;
    dbias[c] += db;
  }
}

}  // namespace

void layernorm_forward(Context& ctx, float* out, float* mean, float* variance, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
  if (N == 0 || C == 0) return;
  layernorm_forward_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(out, mean, variance, inp, weight, bias, C);
  check_launch("layernorm_forward");
}

void layernorm_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* bias, const float* mean,
                        const float* variance, int N, int C) {
  if (N == 0 || C == 0) return;
  layernorm_input_gradient_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(dinp, dout, inp, weight, mean, variance, C);
  check_launch("layernorm_backward (input)");
  layernorm_parameter_gradient_kernel<<<blocks_for(C, 64), 64, 0, stream_of(ctx)>>>(dweight, dbias, dout, inp, mean,
                                                                                       variance, N, C);
  check_launch("layernorm_backward (parameters)");
}

}  // namespace trident::kernels::cuda
