// Which GPUs this binary's CUDA kernels run on (kernel_images.hpp).
#include "kernels/cuda/kernel_images.hpp"

#include <algorithm>

namespace trident::kernels::cuda {

namespace {

// Below sm_80 there are no bf16 tensor cores, which the 16-bit kernels' wmma fragments need.
constexpr int kOldestArchitecture = 80;

std::string capability_text(int capability) {
  return std::to_string(capability / 10) + "." + std::to_string(capability % 10);
}

}  // namespace

KernelFit kernel_fit(const KernelImages& images, int capability) {
  for (const int sass : images.machine_code)
    if (sass / 10 == capability / 10 && sass <= capability) return KernelFit::machine_code;
  if (images.ptx > 0 && images.ptx <= capability) return KernelFit::from_ptx;
  return KernelFit::none;
}

std::string architecture_name(int capability) { return "sm_" + std::to_string(capability); }

std::string describe(const KernelImages& images) {
  std::string text;
  for (size_t i = 0; i < images.machine_code.size(); ++i)
    text += (i == 0 ? "" : ", ") + architecture_name(images.machine_code[i]);
  if (images.ptx > 0) text += (text.empty() ? "" : " and ") + ("PTX " + capability_text(images.ptx));
  return text.empty() ? "no architecture" : text;
}

std::string kernel_fit_problem(const KernelImages& images, int capability, const std::string& gpu) {
  if (kernel_fit(images, capability) != KernelFit::none) return "";
  const std::string what = gpu + " (" + architecture_name(capability) + ") runs none of this binary's CUDA kernels, "
                           "compiled for " + describe(images);
  if (capability < kOldestArchitecture)
    return what + ", and no build can serve it: Trident's CUDA kernels need compute capability " +
           capability_text(kOldestArchitecture) + " or newer (bf16 tensor cores)";
  std::vector<int> wanted = images.machine_code;
  if (std::find(wanted.begin(), wanted.end(), capability) == wanted.end()) wanted.push_back(capability);
  std::sort(wanted.begin(), wanted.end());
  std::string archs;
  for (const int a : wanted) archs += (archs.empty() ? "" : " ") + std::to_string(a);
  return what + ": rebuild with make CUDA_ARCHS=\"" + archs + "\"";
}

}  // namespace trident::kernels::cuda
