// The model's own GEMMs on dummy operands, timed: the ceiling `trident bench --gemm` measures
// a step against, and the compute rate `trident plan --calibrate` writes into this host's profile.
#pragma once

#include <vector>

#include "kernels/kernels.hpp"
#include "model/config.hpp"

namespace trident {

// One GEMM as the model runs it: c[b] (M, N) = op(a[b]) · op(b[b]) for b < batch.
struct GemmShape {
  int batch, M, N, K;
  bool ta, tb, accumulate;
};

// Every forward and backward GEMM of one micro-batch (B sequences of T tokens), as
// model/gpt2.cpp and kernels/cpu/attention.cpp call them.
std::vector<GemmShape> model_gemms(const model::GptConfig& c, int B, int T);

// The model's GEMMs on dummy operands: one pass runs each once.
class GemmPass {
 public:
  GemmPass(const model::GptConfig& config, int B, int T, bool bf16 = false);
  double flops() const { return flops_; }
  double run();  // seconds of one pass

 private:
  kernels::Context ctx_;
  std::vector<GemmShape> shapes_;
  bool bf16_ = false;
  std::vector<float> a_, b_, c_;          // operands, as large as the largest GEMM needs
  std::vector<kernels::bf16> a16_, b16_;  // bf16 operands (bf16 passes)
  double flops_ = 0;
};

}  // namespace trident
