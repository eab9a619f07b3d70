// cuDNN's fused attention (kernels/cuda/cudnn_attention.cpp) where there is no GPU: the graphs the
// CUDA backend hands cuDNN pass cudnn-frontend's validation — its support checks for a GPU
// architecture (shapes, strides, head sizes, types, the causal mask) — for Blackwell (sm_100, whose
// GPUs run our kernels from sm_90's PTX: kernels/cuda/kernel_images.hpp), Hopper (sm_90) and
// Ampere (sm_80), at GPT-2 124M's sizes, Llama 3 8B's grouped heads (32 query heads over 8
// key/value heads of 128 channels) and those tests/gpu runs on a GPU, so that a GPU only
// has to build and run them (tests/gpu's flash_attention_cudnn_*). CUDA builds with cuDNN's
// frontend only; skipped (Boost's precondition) where the build has none.
#if TRIDENT_CUDA
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda.hpp"

namespace utf = boost::unit_test;
namespace cuda = trident::kernels::cuda;
using trident::kernels::Precision;

namespace {

boost::test_tools::assertion_result built_with_cudnn(utf::test_unit_id) {
  boost::test_tools::assertion_result built(cuda::cudnn_attention_build().find("without") == std::string::npos);
  built.message() << "this build has no cuDNN attention (CUDNN=0, or make deps could not fetch cuDNN's frontend)";
  return built;
}

// KV key/value heads (0: NH, multi-head).
cuda::FusedAttention sizes(int B, int T, int NH, int hs, Precision values, int KV = 0) {
  return {nullptr, B, T, NH, KV ? KV : NH, hs, values, 1.0f / std::sqrt(static_cast<float>(hs))};
}

std::string named(const cuda::FusedAttention& a, int sm) {
  return "B " + std::to_string(a.B) + " T " + std::to_string(a.T) + " heads " + std::to_string(a.NH) + " over " +
         std::to_string(a.KV) + " of " + std::to_string(a.hs) + (a.values == Precision::fp16 ? " fp16" : " bf16") +
         " sm_" + std::to_string(sm);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cudnn_attention)

BOOST_AUTO_TEST_CASE(its_graphs_pass_cudnn_frontend_validation_for_blackwell_hopper_and_ampere,
                     *utf::precondition(built_with_cudnn)) {
  for (const int sm : {100, 90, 80})
    for (const Precision values : {Precision::bf16, Precision::fp16})
      for (const cuda::FusedAttention& a :
           {sizes(16, 1024, 12, 64, values), sizes(2, 37, 2, 128, values), sizes(2, 130, 2, 32, values),
            sizes(2, 2, 2, 64, values), sizes(1, 8192, 32, 128, values, 8), sizes(2, 1024, 32, 128, values, 8),
            sizes(2, 70, 4, 128, values, 1), sizes(2, 130, 4, 64, values, 2)}) {
        const std::string why = cuda::cudnn_attention_graph_check(a, sm);
        BOOST_TEST(why.empty(), named(a, sm) << ": " << why);
      }
}

// The check can fail, and what cuDNN refuses runs on our kernels: heads wider than its fused
// attention takes, and a sequence of one position (its "s_q = s_kv = 1 is not supported").
BOOST_AUTO_TEST_CASE(it_refuses_wide_heads_and_single_positions, *utf::precondition(built_with_cudnn)) {
  for (const cuda::FusedAttention& a : {sizes(2, 64, 2, 512, Precision::bf16), sizes(2, 1, 2, 64, Precision::bf16)})
    BOOST_TEST(!cuda::cudnn_attention_graph_check(a, 90).empty(), named(a, 90));
}

BOOST_AUTO_TEST_SUITE_END()

#endif
