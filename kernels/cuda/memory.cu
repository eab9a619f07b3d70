// The CUDA backend's operations on buffers: clear, copy, upload, download on the Context's
// stream, and the loss sum (downloaded and summed on the host in index order in double, as the
// CPU does: the same bits, and a few KiB per micro-batch).
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda.hpp"

namespace trident::kernels::cuda {

void clear(Context& ctx, const Tensor& t) {
  check(cudaMemsetAsync(t.data, 0, t.bytes(), stream_of(ctx)), "cudaMemsetAsync");
}

void copy(Context& ctx, const Tensor& dst, const Tensor& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    throw std::logic_error("kernels::cuda: copy between tensors of different types or sizes");
  if (src.bytes() == 0 || dst.data == src.data) return;
  check(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, stream_of(ctx)), "cudaMemcpyAsync");
}

// The host memory is ordinary (pageable): the copy is complete when the call returns, so the
// caller may reuse it at once.
void upload(Context& ctx, const Tensor& dst, const void* host) {
  check(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, stream_of(ctx)), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream_of(ctx)), "cudaStreamSynchronize");
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

}  // namespace trident::kernels::cuda
