// Element-wise kernels: GELU, residual adds, AdamW, and the deterministic sum of squares, each
// element computed by the arithmetic shared with the CPU tests (kernels/common/elementwise.hpp).
#include <vector>

#include "kernels/common/elementwise.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n) {
  FOR_EACH_ELEMENT(i, n) out[i] = gelu_value(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  FOR_EACH_ELEMENT(i, n) dinp[i] = gelu_gradient(inp[i], dout[i]);
}

__global__ void residual_kernel(float* out, const float* a, const float* b, size_t n) {
  FOR_EACH_ELEMENT(i, n) out[i] = a[i] + b[i];
}

// out (M, N) = residual + (x + bias[n])
__global__ void bias_residual_kernel(float* out, const float* residual, const float* x, const float* bias, int M,
                                     int N) {
  FOR_EACH_ELEMENT(i, static_cast<size_t>(M) * N) out[i] = residual[i] + (x[i] + bias[i % N]);
}

__global__ void add_inplace_kernel(float* acc, const float* x, size_t n) {
  FOR_EACH_ELEMENT(i, n) acc[i] += x[i];
}

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, size_t n, AdamWStep step) {
  FOR_EACH_ELEMENT(i, n) {
    float p = params[i], m_i = m[i], v_i = v[i];
    adamw_element(step, p, grads[i], m_i, v_i);
    params[i] = p, m[i] = m_i, v[i] = v_i;
  }
}

// partial[chunk] = Σ x² over the chunk, in the CPU's fixed order (one thread per chunk).
__global__ void sum_of_squares_kernel(double* partial, const float* x, size_t n, size_t chunks) {
  FOR_EACH_ELEMENT(chunk, chunks) {
    const size_t begin = chunk * kSumOfSquaresChunk;
    const size_t end = begin + kSumOfSquaresChunk < n ? begin + kSumOfSquaresChunk : n;
    partial[chunk] = sum_of_squares_chunk(x, begin, end);
  }
}

}  // namespace

void gelu_forward(Context& ctx, float* out, const float* inp, size_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, inp, n);
  check_launch("gelu_forward");
}

void gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, size_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dinp, inp, dout, n);
  check_launch("gelu_backward");
}

void residual_forward(Context& ctx, float* out, const float* a, const float* b, size_t n) {
  if (n == 0) return;
  residual_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, a, b, n);
  check_launch("residual_forward");
}

void bias_residual_forward(Context& ctx, float* out, const float* residual, const float* x, const float* bias, int M,
                           int N) {
  if (M == 0 || N == 0) return;
  bias_residual_kernel<<<blocks_for(static_cast<size_t>(M) * N), kThreads, 0, stream_of(ctx)>>>(out, residual, x,
                                                                                                 bias, M, N);
  check_launch("bias_residual_forward");
}

void add_inplace(Context& ctx, float* acc, const float* x, size_t n) {
  if (n == 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(acc, x, n);
  check_launch("add_inplace");
}

void adamw_update(Context& ctx, float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t, float grad_scale) {
  if (n == 0) return;
  const AdamWStep step = adamw_step(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(params, grads, m, v, n, step);
  check_launch("adamw_update");
}

// The chunks' sums on the device, added in chunk order on the host: the CPU's sum, bit for bit
// up to the contraction of x·x + lane into one fused multiply-add.
double sum_of_squares(Context& ctx, const float* x, size_t n) {
  const size_t chunks = (n + kSumOfSquaresChunk - 1) / kSumOfSquaresChunk;
  if (chunks == 0) return 0.0;
  double* partial = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * sizeof(double), stream_of(ctx)),
        "cudaMallocAsync (sum_of_squares)");
  sum_of_squares_kernel<<<blocks_for(chunks), kThreads, 0, stream_of(ctx)>>>(partial, x, n, chunks);
  check_launch("sum_of_squares");
  std::vector<double> host(chunks);
  check(cudaMemcpyAsync(host.data(), partial, chunks * sizeof(double), cudaMemcpyDeviceToHost, stream_of(ctx)),
        "cudaMemcpyAsync (sum_of_squares)");
  check(cudaFreeAsync(partial, stream_of(ctx)), "cudaFreeAsync (sum_of_squares)");
  check(cudaStreamSynchronize(stream_of(ctx)), "cudaStreamSynchronize (sum_of_squares)");
  double total = 0.0;
  for (double p : host) total += p;
  return total;
}

}  // namespace trident::kernels::cuda
