// What the compute backends of this build are: the CPU library (oneDNN) and, in a CUDA build,
// the CUDA runtime, cuBLASLt, NCCL and the devices visible to this process.
#pragma once

#include <string>

namespace trident::kernels {

// Several lines "CPU: ...", "CUDA: ..." for `trident version`.
std::string accelerator_summary();

}  // namespace trident::kernels
