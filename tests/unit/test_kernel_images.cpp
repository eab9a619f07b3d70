// Which GPUs a CUDA build's kernels run on (kernels/cuda/kernel_images.hpp): the driver's rules
// for machine code and PTX, the refusal a GPU outside them gets, and this build's own images.
// CUDA builds only.
#if TRIDENT_CUDA
#include <boost/test/unit_test.hpp>

#include <string>

#include "kernels/cuda/kernel_images.hpp"

namespace cuda = trident::kernels::cuda;
using cuda::KernelFit;

namespace {

const cuda::KernelImages kDefault{{80, 90}, 90};  // the Makefile's CUDA_ARCHS = 80 90

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_images)

// sm_80's machine code runs on Ampere's and Ada's later minors, sm_90's on Hopper; a Blackwell
// GPU (10.0, 12.0) runs sm_90's PTX; Turing (7.5) runs nothing of it.
BOOST_AUTO_TEST_CASE(machine_code_within_its_major_ptx_on_anything_newer) {
  BOOST_TEST((cuda::kernel_fit(kDefault, 80) == KernelFit::machine_code));
  BOOST_TEST((cuda::kernel_fit(kDefault, 86) == KernelFit::machine_code));
  BOOST_TEST((cuda::kernel_fit(kDefault, 89) == KernelFit::machine_code));
  BOOST_TEST((cuda::kernel_fit(kDefault, 90) == KernelFit::machine_code));
  BOOST_TEST((cuda::kernel_fit(kDefault, 100) == KernelFit::from_ptx));
  BOOST_TEST((cuda::kernel_fit(kDefault, 120) == KernelFit::from_ptx));
  BOOST_TEST((cuda::kernel_fit(kDefault, 75) == KernelFit::none));
  // Without PTX nothing reaches past the machine code's majors; an older minor never runs a newer one's.
  const cuda::KernelImages ampere_only{{86}, 0};
  BOOST_TEST((cuda::kernel_fit(ampere_only, 90) == KernelFit::none));
  BOOST_TEST((cuda::kernel_fit(ampere_only, 80) == KernelFit::none));
  BOOST_TEST((cuda::kernel_fit(ampere_only, 89) == KernelFit::machine_code));
}

BOOST_AUTO_TEST_CASE(a_gpu_without_kernels_is_told_the_build_that_has_them) {
  BOOST_TEST(cuda::describe(kDefault) == "sm_80, sm_90 and PTX 9.0");
  BOOST_TEST(cuda::kernel_fit_problem(kDefault, 100, "GPU 0, NVIDIA B200").empty());
  const cuda::KernelImages ampere_only{{80}, 0};
  BOOST_TEST(cuda::kernel_fit_problem(ampere_only, 90, "GPU 3, NVIDIA H100 80GB HBM3") ==
             "GPU 3, NVIDIA H100 80GB HBM3 (sm_90) runs none of this binary's CUDA kernels, compiled for sm_80: "
             "rebuild with make CUDA_ARCHS=\"80 90\"");
  const std::string turing = cuda::kernel_fit_problem(kDefault, 75, "GPU 0, Tesla T4");
  BOOST_TEST(turing.find("no build can serve it") != std::string::npos, turing);
  BOOST_TEST(turing.find("8.0 or newer") != std::string::npos, turing);
}

// This build: machine code for what nvcc compiled, and the PTX of the newest of them, so that a
// GPU newer than the build still runs it.
BOOST_AUTO_TEST_CASE(this_build_carries_the_ptx_of_its_newest_architecture) {
  const cuda::KernelImages built = cuda::compiled_kernel_images();
  BOOST_TEST_REQUIRE(!built.machine_code.empty());
  BOOST_TEST(built.ptx == built.machine_code.back());
  BOOST_TEST((cuda::kernel_fit(built, built.ptx + 10) == KernelFit::from_ptx));
}

BOOST_AUTO_TEST_SUITE_END()

#endif
