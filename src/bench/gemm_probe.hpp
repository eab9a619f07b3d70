// The model's own GEMMs on dummy operands, and one training step on one rank, timed: the
// ceiling `trident bench --gemm` measures a step against, and what `trident plan --calibrate`
// writes into this host's profile (the GEMM rate, and the rate of everything else in a step).
#pragma once

#include <vector>

#include "deck/record.hpp"
#include "job/settings.hpp"
#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/transformer.hpp"
#include "optim/adamw.hpp"
#include "tensor/buffer.hpp"

namespace trident {

// One GEMM as the model runs it: c[b] (M, N) = op(a[b]) · op(b[b]) for b < batch.
struct GemmShape {
  int batch, M, N, K;
  bool ta, tb, accumulate;
};

// Every forward and backward GEMM of one micro-batch (B sequences of T tokens), as
// model/transformer.cpp and kernels/cpu/attention.cpp call them.
std::vector<GemmShape> model_gemms(const model::GptConfig& c, int B, int T);

// One shape's achieved rate.
struct ShapeRate {
  GemmShape shape;
  double flops_per_s;
};

// The model's GEMMs on dummy operands: one pass runs each once.
class GemmPass {
 public:
  GemmPass(const kernels::Context& device, const model::GptConfig& config, int B, int T, bool bf16 = false);
  double flops() const { return flops_; }
  double run();  // seconds of one pass
  // Each distinct shape (batch, M, N, K) of the pass timed alone (the median over `rounds`), the
  // rates scaled together so that they give the pass `pass_seconds` (what run() measured): their
  // ratios from the shapes alone, their level from the pass.
  std::vector<ShapeRate> shape_rates(int rounds, double pass_seconds);

 private:
  void call(const GemmShape& s);  // one product, queued
  void wait();                     // until the queued products are done
  kernels::Context ctx_;
  std::vector<GemmShape> shapes_;
  bool bf16_ = false;
  // Operands as large as the largest GEMM needs, on the device the GEMMs run on.
  Buffer<float> a_, b_, c_;
  TensorBuffer a16_, b16_;  // bf16 operands (bf16 passes)
  double flops_ = 0;
};

// A training step of the deck's model on fixed random tokens.
class StepRunner {
 public:
  StepRunner(const kernels::Context& device, const RunSettings& settings, const deck::Record& deck,
             kernels::Precision precision);
  double tokens() const { return static_cast<double>(micro_batches_) * B_ * T_; }
  double flops() const { return tokens() * model::training_flops_per_token(config_, T_); }
  double run();  // seconds of one step
  int64_t graph_replays() const { return gpt_.graph_replays(); }  // cuda.graphs: forwards and backwards replayed

 private:
  kernels::Context ctx_;
  model::GptConfig config_;
  model::Transformer gpt_;
  optim::AdamW optimizer_;
  int B_ = 0, T_ = 0;
  int64_t micro_batches_ = 0, updates_ = 0;
  std::vector<int32_t> tokens_;
};

}  // namespace trident
