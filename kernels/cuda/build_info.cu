// CUDA part of the backend summary: runtime, where cuBLASLt and NCCL were loaded from (or why
// they cannot be), the attention's library, the GPUs the kernels are compiled for,
// visible devices and how each runs them.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/cuda_libraries.hpp"
#include "kernels/cuda/kernel_images.hpp"

namespace trident::comm {
std::string nccl_summary();  // src/comm/nccl/nccl.cpp
}

namespace trident::kernels {

namespace {

const char* fit_text(cuda::KernelFit fit) {
  switch (fit) {
    case cuda::KernelFit::machine_code: return "kernels as machine code";
    case cuda::KernelFit::from_ptx: return "kernels compiled from PTX at the first launch";
    case cuda::KernelFit::none: return "no kernel of this binary runs on it";
  }
  return "";
}

}  // namespace

std::string cuda_summary() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::string text = "CUDA: runtime " + std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
                     ", " + cuda::cublaslt_summary() + ", " + comm::nccl_summary() +
                     "\nCUDA attention: " + cuda::cudnn_attention_build() + "\nCUDA kernels: " +
                     cuda::describe(cuda::compiled_kernel_images()) + "\nCUDA devices: ";
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return text + "none (" + cudaGetErrorString(status) + ")";
  if (count == 0) return text + "none";
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties{};
    cudaGetDeviceProperties(&properties, device);
    const int capability = 10 * properties.major + properties.minor;
    text += (device ? "; " : "") + std::to_string(device) + ": " + properties.name + " (" +
            std::to_string(properties.totalGlobalMem >> 30) + " GiB, " + cuda::architecture_name(capability) + ", " +
            fit_text(cuda::kernel_fit(cuda::compiled_kernel_images(), capability)) + ")";
  }
  return text;
}

}  // namespace trident::kernels
