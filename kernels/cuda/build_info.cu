// CUDA part of the backend summary: runtime, cuBLASLt and NCCL versions, visible devices. Also
// the proof, in every CUDA build, that CUDA, cuBLASLt and NCCL compile and link.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "kernels/cuda/cuda.hpp"

namespace trident::kernels {

std::string cuda_summary() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int nccl = 0;
  ncclGetVersion(&nccl);
  std::string text = "CUDA: runtime " + std::to_string(runtime / 1000) + "." +
                     std::to_string(runtime % 1000 / 10) + ", cuBLASLt " +
                     std::to_string(cublasLtGetVersion()) + ", NCCL " + std::to_string(nccl) +
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
