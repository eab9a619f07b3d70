// Which GPUs this binary's CUDA kernels run on. nvcc compiles each kernel for the Makefile's
// CUDA_ARCHS: machine code (SASS) per architecture, and the PTX of the last one. The driver runs
// an architecture's machine code on GPUs of the same major version and at least its minor one
// (sm_80's on an sm_86 or sm_89, never sm_90's on an sm_100), and compiles the PTX for any GPU
// of at least its capability at the first launch (sm_90's on a B200). A GPU neither reaches has
// no kernel to launch: said once at start-up, with the build that would have one, rather than
// as cudaErrorNoKernelImageForDevice at the first kernel. Host code only.
#pragma once

#include <string>
#include <vector>

namespace trident::kernels::cuda {

// Compute capabilities as 10·major + minor (80: A100, 89: L40S, 90: H100 and H200, 100: B200).
struct KernelImages {
  std::vector<int> machine_code;  // the SASS architectures, ascending
  int ptx = 0;                    // the PTX's architecture; 0: none
};

enum class KernelFit { machine_code, from_ptx, none };

KernelFit kernel_fit(const KernelImages& images, int capability);
// "sm_80, sm_90 and PTX 9.0"
std::string describe(const KernelImages& images);
// "sm_90": how nvcc and nvidia-smi name an architecture.
std::string architecture_name(int capability);
// "" where the GPU runs the kernels (machine code or PTX); else why not and what to do: another
// build (make CUDA_ARCHS), or the CPU where no build can serve (below sm_80: no bf16 tensor cores).
std::string kernel_fit_problem(const KernelImages& images, int capability, const std::string& gpu);

// This binary's images (backend.cu: nvcc's __CUDA_ARCH_LIST__ and the Makefile's PTX architecture).
KernelImages compiled_kernel_images();

}  // namespace trident::kernels::cuda
