// The CUDA backend's operations on buffers: clear, copy, upload, download on the Context's
// stream, and the loss sum: sum() downloads and sums on the host in index order in double, as
// the CPU does (the same bits, a few KiB per micro-batch); sum_into() sums on the device in one
// block, a fixed tree in double (the same value every run, not always the CPU's last bit), so
// that a captured forward holds no host synchronisation.
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda.hpp"

namespace trident::kernels::cuda {
namespace {

constexpr int kSumThreads = 1024;

// One block: thread i adds values i, i + 1024, … in order, then the warps' shuffle trees and the
// warps in order, all in double.
__global__ void sum_into_kernel(double* out, const float* values, size_t n) {
  __shared__ double warp_sums[kSumThreads / 32];
  double total = 0.0;
  for (size_t i = threadIdx.x; i < n; i += kSumThreads) total += values[i];
  for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = total;
  __syncthreads();
  if (threadIdx.x != 0) return;
  double sum = 0.0;
  for (int warp = 0; warp < kSumThreads / 32; ++warp) sum += warp_sums[warp];
  *out = sum;
}

}  // namespace

size_t shared_memory_limit() {
  static const size_t limit = [] {
    int device = 0, bytes = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "cudaDeviceGetAttribute (shared memory per block)");
    return static_cast<size_t>(bytes);
  }();
  return limit;
}

void clear(Context& ctx, const Tensor& t) {
  check(cudaMemsetAsync(t.data, 0, t.bytes(), stream_of(ctx)), "cudaMemsetAsync");
}

void copy(Context& ctx, const Tensor& dst, const Tensor& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    throw std::logic_error("kernels::cuda: copy between tensors of different types or sizes");
  if (src.bytes() == 0 || dst.data == src.data) return;
  check(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, stream_of(ctx)), "cudaMemcpyAsync");
}

// No wait for the stream: from pageable host memory cudaMemcpyAsync returns once the bytes are
// in CUDA's staging buffer (the runtime's "API synchronization behavior"), so the caller may
// reuse its buffer at once, and the copy stays ordered on the stream; waiting here drained the
// whole stream at every upload. From pinned memory the copy is truly asynchronous: the caller
// keeps that buffer unchanged until the stream has passed the copy.
void upload(Context& ctx, const Tensor& dst, const void* host) {
  check(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, stream_of(ctx)), "cudaMemcpyAsync");
}

void download(Context& ctx, void* host, const Tensor& src) {
  check(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, stream_of(ctx)), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream_of(ctx)), "cudaStreamSynchronize");
}

double sum(Context& ctx, const Tensor& values) {
  std::vector<float> host(values.numel());
  values.as<float>();  // f32 values, or a logic_error
  cuda::download(ctx, host.data(), values);
  double total = 0.0;
  for (float x : host) total += x;
  return total;
}

void sum_into(Context& ctx, const Tensor& out, const Tensor& values) {
  if (out.dtype != DType::f64 || out.numel() != 1)
    throw std::logic_error("kernels::cuda: sum_into needs one f64 element to write");
  sum_into_kernel<<<1, kSumThreads, 0, stream_of(ctx)>>>(out.as<double>(), values.as<float>(), values.numel());
  check_launch("sum_into");
}

}  // namespace trident::kernels::cuda
