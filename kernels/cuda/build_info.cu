// CUDA part of the backend summary: runtime, where cuBLASLt and NCCL were loaded from (or why
// they cannot be), the attention's library, visible devices.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/cuda_libraries.hpp"

namespace trident::comm {
std::string nccl_summary();  // src/comm/nccl/nccl.cpp
}

namespace trident::kernels {

std::string cuda_summary() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::string text = "CUDA: runtime " + std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
                     ", " + cuda::cublaslt_summary() + ", " + comm::nccl_summary() +
                     "\nCUDA attention: " + cuda::cudnn_attention_build() + "\nCUDA devices: ";
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return text + "none (" + cudaGetErrorString(status) + ")";
  if (count == 0) return text + "none";
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties{};
    cudaGetDeviceProperties(&properties, device);
    text += (device ? "; " : "") + std::to_string(device) + ": " + properties.name + " (" +
            std::to_string(properties.totalGlobalMem >> 30) + " GiB, sm_" +
            std::to_string(properties.major) + std::to_string(properties.minor) + ")";
  }
  return text;
}

}  // namespace trident::kernels
