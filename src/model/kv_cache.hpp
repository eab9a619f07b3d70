// Autoregressive decoding of the whole (serial) GPT-2 with a key/value cache: each step runs one
// new token through the model — its q, k, v; its keys and values appended to the cache; its
// attention over the cached positions — instead of the whole sequence again. The math is the
// model's own forward (model/gpt2.hpp, docs/MODEL.md) at one position, with the same kernels
// (kernels/kernels.hpp) for the linear layers, LayerNorm and GELU; the attention of one query
// is a loop over the cached keys. fp32 parameters, on the Context's device.
#pragma once

#include <vector>

#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/buffer.hpp"

namespace trident::model {

class KvDecoder {
 public:
  // params: the whole model (num_parameters(config)), llm.c order, in host memory; copied to the
  // Context's device.
  KvDecoder(const GptConfig& config, const float* params, kernels::Context& ctx);
  // Feeds `token` at the next position (0, 1, ... up to max_seq_len − 1) and returns the logits
  // (Vp, in host memory) of the token after it; valid until the next step.
  const float* step(int token);
  int position() const { return position_; }  // tokens fed so far
  void reset() { position_ = 0; }

 private:
  Tensor on_device(const float* data, Shape shape) const;  // memory of params_' device as `shape`
  void linear(float* y, const float* x, const float* w, const float* bias, int K, int N);
  void layernorm(const float* weight, const float* bias);  // ln_ = LayerNorm(x_)
  void block(int l);                   // x_ through block l at position_
  void attend(int l, const float* q);  // atty_ = attention of q over positions 0..position_

  GptConfig config_;
  Buffer<float> params_;  // (num_parameters(config)) on the device
  ParamViews p_;          // views of params_
  kernels::Context& ctx_;
  int position_ = 0;
  Buffer<float> keys_, values_;        // (L, maxT, C) each
  Buffer<float> x_, ln_, atty_, proj_; // (C) each: residual stream, LayerNorm out, attention out, projection
  Buffer<float> qkv_;                  // (3C)
  Buffer<float> fch_, gelu_;           // (4C) each
  Buffer<float> scores_;               // (NH, maxT)
  Buffer<float> stats_;                // (2): LayerNorm mean and variance
  Buffer<float> logits_;               // (Vp)
  std::vector<float> host_logits_;     // (Vp) logits_ in host memory: what step() returns
};

}  // namespace trident::model
