// The cuBLASLt GEMM rate of this GPU through the CUDA backend's own linear layer (bf16 operands,
// f32 accumulation and result; and f32 without TF32): the ceiling of scripts/gpu-check.sh's table,
// on the shapes of GPT-2 124M's linear layers at B·T = 8192 tokens (C = 768), a square 8192³ and
// Llama 3's (8B whole, 70B over tensor 8). Prints per shape "gemm <type> M K N (what): <TFLOP/s>"
// and the same as a profile's [gemm] line, "profile <precision>.MxNxK = <TFLOP/s>"
// (scripts/gpu-check.sh gathers those into gemm-table.ini); a line "SKIP ..." and exit 0 where
// CUDA sees no GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "metrics/progress.hpp"
#include "tensor/buffer.hpp"

using namespace trident;

namespace {

struct GemmShape {
  int M, K, N;
  const char* what;
};

// t of random values (metrics::probe_values, as the trainer's own peak): a product of the
// allocator's zeros would run at the higher clocks of a lighter load.
void fill_random(kernels::Context& ctx, const Tensor& t, uint64_t seed) {
  const std::vector<float> values = metrics::probe_values(t.numel(), seed);
  if (t.dtype == DType::f32) return kernels::upload(ctx, t, values.data());
  Buffer<float> staged(values.size(), MemoryCategory::Workspace, *ctx.backend, MemoryKind::device);
  kernels::upload(ctx, staged.view(t.shape), values.data());
  kernels::convert(ctx, t, staged.view(t.shape));
}

// Warm up (the plan created and cached), then the mean over enough runs to take ~0.3 s.
double tflops(kernels::Context& ctx, DType type, const GemmShape& s) {
  kernels::Backend& gpu = *ctx.backend;
  const size_t e = dtype_size(type);
  Buffer<unsigned char> x(size_t(s.M) * s.K * e, MemoryCategory::Workspace, gpu, MemoryKind::device);
  Buffer<unsigned char> w(size_t(s.N) * s.K * e, MemoryCategory::Workspace, gpu, MemoryKind::device);
  Buffer<float> y(size_t(s.M) * s.N, MemoryCategory::Workspace, gpu, MemoryKind::device);
  const Tensor xt{x.data(), type, trident::Shape{s.M, s.K}, gpu.device()}, wt{w.data(), type, trident::Shape{s.N, s.K}, gpu.device()};
  const Tensor yt = y.view({s.M, s.N});
  fill_random(ctx, xt, 1);
  fill_random(ctx, wt, 2);
  const double flops = 2.0 * s.M * s.N * s.K;
  for (int i = 0; i < 3; ++i) kernels::linear_forward(ctx, yt, xt, wt, Tensor{});
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream.handle);
  int runs = 10;
  float ms = 0.0f;
  for (;;) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < runs; ++i) kernels::linear_forward(ctx, yt, xt, wt, Tensor{});
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    cudaEventElapsedTime(&ms, start, stop);
    if (ms > 300.0f || runs >= 10000) break;
    runs *= 4;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return flops * runs / (ms * 1e-3) / 1e12;
}

}  // namespace

int main() {
  const std::string why = kernels::backend_unavailable("cuda");
  if (!why.empty()) {
    std::printf("SKIP gemm_rate (%s)\n", why.c_str());
    return 0;
  }
  kernels::Context ctx;
  ctx.backend = kernels::find_backend("cuda");
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  ctx.stream = Stream{ctx.backend->device(), stream};
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  std::printf("device: %s (sm_%d%d)\n", properties.name, properties.major, properties.minor);
  const std::vector<GemmShape> shapes = {{8192, 768, 2304, "GPT-2 124M qkv"},   {8192, 768, 768, "attention proj"},
                                     {8192, 768, 3072, "MLP fc"},           {8192, 3072, 768, "MLP proj"},
                                     {8192, 768, 50304, "LM head"},         {8192, 8192, 8192, "square"},
                                     {8192, 4096, 6144, "Llama 3 8B qkv"},  {8192, 4096, 4096, "Llama 3 8B wo"},
                                     {8192, 4096, 28672, "Llama 3 8B gate+up"}, {8192, 14336, 4096, "Llama 3 8B down"},
                                     {8192, 8192, 1280, "Llama 3 70B qkv over tensor 8"},
                                     {8192, 3584, 8192, "Llama 3 70B down over tensor 8"}};
  for (DType type : {DType::bf16, DType::f32})
    for (const GemmShape& s : shapes) {
      try {
        const double rate = tflops(ctx, type, s);
        std::printf("gemm %s M %d K %d N %d (%s): %.1f TFLOP/s\n", dtype_name(type), s.M, s.K, s.N, s.what, rate);
        // The same as a hardware profile's [gemm] line (plan/hardware.hpp: PRECISION.MxNxK = TFLOP/s).
        std::printf("profile %s.%dx%dx%d = %.1f\n", type == DType::bf16 ? "bf16" : "fp32", s.M, s.N, s.K, rate);
      } catch (const std::exception& e) {
        std::printf("FAIL gemm_rate %s M %d K %d N %d: %s\n", dtype_name(type), s.M, s.K, s.N, e.what());
        return 1;
      }
      std::fflush(stdout);
    }
  return 0;
}
