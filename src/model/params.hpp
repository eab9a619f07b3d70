// The parameters of GPT-2: 16 tensors in llm.c's order, in one contiguous allocation, with the
// names, shapes and initialisation documented in docs/MODEL.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace trident::model {

constexpr int kNumParamTensors = 16;

struct ParamSpec {
  std::string name;              // "wte", "blocks.qkvw", ... (docs/MODEL.md)
  std::vector<int64_t> shape;    // including the leading layer dimension L for per-block tensors
  bool weight_decay = false;     // 2-D weight matrices (per block) and the embeddings
  int64_t count() const;
};

// In llm.c's file order: wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b,
// fcw, fcb, fcprojw, fcprojb, lnfw, lnfb.
std::array<ParamSpec, kNumParamTensors> param_specs(const GptConfig& config);

// Pointers to each tensor inside one flat buffer (parameters, or gradients of the same layout).
struct ParamViews {
  float* wte;       // (Vp, C)
  float* wpe;       // (maxT, C)
  float* ln1w;      // (L, C)
  float* ln1b;      // (L, C)
  float* qkvw;      // (L, 3C, C)
  float* qkvb;      // (L, 3C)
  float* attprojw;  // (L, C, C)
  float* attprojb;  // (L, C)
  float* ln2w;      // (L, C)
  float* ln2b;      // (L, C)
  float* fcw;       // (L, 4C, C)
  float* fcb;       // (L, 4C)
  float* fcprojw;   // (L, C, 4C)
  float* fcprojb;   // (L, C)
  float* lnfw;      // (C)
  float* lnfb;      // (C)
};
ParamViews param_views(const GptConfig& config, float* base);
int64_t num_parameters(const GptConfig& config);

// GPT-2 initialisation: weights N(0, 0.02), the residual output projections (attprojw,
// fcprojw) N(0, 0.02/√(2L)), LayerNorm weights 1, biases 0. Every element is a function of
// (seed, tensor, index) alone — a counter-based generator — so any shard of any layout
// initialises to the same values as the serial model. Tensor t (in file order), element i:
// stddev · normal_at(seed, t, i) (core/random.hpp).
void init_params(const GptConfig& config, float* params, uint64_t seed);

}  // namespace trident::model
