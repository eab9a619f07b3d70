// Backend summary: the CPU part always; the CUDA part comes from kernels/cuda in a CUDA build.
#include "kernels/build_info.hpp"
#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"

#include <dnnl.hpp>

#include <string>

namespace trident::kernels {

#if TRIDENT_CUDA
std::string cuda_summary();  // kernels/cuda/build_info.cu
#else
static std::string cuda_summary() {
  return "CUDA: not compiled in (build with nvcc present, or make CUDA=1)";
}
#endif

// Which kernels.device values this binary can run here, and why not the others.
static std::string backends_summary() {
  std::string text = "Kernel backends (kernels.device):";
  for (const char* name : {"cpu", "cuda"}) {
    const std::string why = backend_unavailable(name);
    text += std::string(" ") + name + (why.empty() ? " (available)" : " (unavailable: " + why + ")") + ";";
  }
  text.pop_back();
  return text;
}

std::string accelerator_summary() {
  const dnnl_version_t* v = dnnl_version();
  const Context ctx;  // the paths a job with kernels.low16_gemm = auto takes on this CPU
  return "CPU: oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " on " + cpu_isa() + "\n" + gemm_path_summary(ctx, Precision::bf16) + "\n" +
         gemm_path_summary(ctx, Precision::fp16) + "\n" + cuda_summary() + "\n" + backends_summary();
}

}  // namespace trident::kernels
