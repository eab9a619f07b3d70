// The CUDA backend, namespace kernels::cuda: device, pinned and host memory, and the memory
// operations (clear, copy, upload, download) on the Context's stream. Its compute kernels are
// not written yet, so its table lacks them and it says so (unavailable_reason): kernels.device
// = cuda is a deck error until every entry is there, never a backend that pretends.
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/backend.hpp"

namespace trident::kernels::cuda {

#include "kernels/ops.inc"

namespace {

cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.stream.handle); }

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

KernelTable make_table() {
  KernelTable t;
  t.clear = &cuda::clear;
  t.copy = &cuda::copy;
  t.upload = &cuda::upload;
  t.download = &cuda::download;
  return t;
}

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device{DeviceKind::cuda, 0}; }
  void* allocate(size_t bytes, MemoryKind kind) override {
    void* pointer = nullptr;
    if (kind == MemoryKind::host) return host_allocator().allocate(bytes, kind);
    if (kind == MemoryKind::pinned_host) {
      if (cudaMallocHost(&pointer, bytes) != cudaSuccess) return nullptr;
      std::memset(pointer, 0, bytes);
      return pointer;
    }
    if (cudaMalloc(&pointer, bytes) != cudaSuccess) return nullptr;  // 256-byte aligned
    if (cudaMemset(pointer, 0, bytes) != cudaSuccess) {
      cudaFree(pointer);
      return nullptr;
    }
    return pointer;
  }
  void release(void* pointer, size_t bytes, MemoryKind kind) override {
    if (kind == MemoryKind::host) host_allocator().release(pointer, bytes, kind);
    else if (kind == MemoryKind::pinned_host) cudaFreeHost(pointer);
    else cudaFree(pointer);
  }
  const char* name() const override { return "cuda"; }
  const KernelTable& kernels() const override { return table_; }
  std::string unavailable_reason() const override {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0)
      return std::string("this machine has no GPU visible to CUDA (cudaGetDeviceCount: ") +
             (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") + ")";
    if (table_.present() < KernelTable::total())
      return "this binary's CUDA backend has no compute kernels yet (" + std::to_string(table_.present()) + " of " +
             std::to_string(KernelTable::total()) + " operations)";
    return "";
  }

 private:
  KernelTable table_ = make_table();
};

}  // namespace

Backend& backend() {
  // Never destroyed, so that buffers of static storage duration, released at exit in whatever
  // order, can still reach it.
  static CudaBackend* const instance = new CudaBackend();
  return *instance;
}

void clear(Context& ctx, const Tensor& t) {
  check(cudaMemsetAsync(t.data, 0, t.bytes(), stream_of(ctx)), "cudaMemsetAsync");
}

void copy(Context& ctx, const Tensor& dst, const Tensor& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    throw std::logic_error("kernels::cuda: copy between tensors of different types or sizes");
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

}  // namespace trident::kernels::cuda
