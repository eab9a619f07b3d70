// Autoregressive decoding of the whole (serial) model — any architecture's block parts — with a
// key/value cache: each step runs one new token through the model — its q, k, v; its keys and
// values appended to the cache; its attention over the cached positions — instead of the whole
// sequence again. The math is the model's own forward (model/transformer.hpp, docs/MODEL.md) at one
// position, with the same kernels (kernels/kernels.hpp) for the linear layers, the norms
// (LayerNorm, RMSNorm), GELU or SwiGLU and the rotary positions; the attention of one query is a
// loop over the cached keys. Llama's cache holds its kv_heads key/value heads (grouped-query
// attention: kv_heads/heads of a multi-head cache), its keys rotated at their positions as the
// training forward rotates them. fp32 parameters, on the Context's device.
#pragma once

#include <vector>

#include "kernels/kernels.hpp"
#include "model/block_parts.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/buffer.hpp"

namespace trident::model {

class KvDecoder {
 public:
  // params: the whole model (num_parameters(config)), our order, in host memory; copied to the
  // Context's device. capacity: the positions the cache holds (at most config.max_seq_len;
  // 0: all of them).
  KvDecoder(const GptConfig& config, const float* params, kernels::Context& ctx, int capacity = 0);
  // The bytes of the buffers the constructor allocates on the Context's device — the parameters
  // in f32, the cache of `capacity` positions (as the constructor reads it), one position's
  // buffers: what trident generate's memory check counts (unit generate's
  // decoder_bytes_are_what_it_allocates holds it to the tracked bytes).
  static int64_t buffer_bytes(const GptConfig& config, int capacity);
  // Feeds `token` at the next position (0, 1, ... up to capacity − 1) and returns the logits
  // (Vp, in host memory) of the token after it; valid until the next step.
  const float* step(int token);
  int position() const { return position_; }  // tokens fed so far
  int capacity() const { return capacity_; }
  void reset() { position_ = 0; }

 private:
  Tensor on_device(const float* data, Shape shape) const;  // memory of params_' device as `shape`
  void linear(float* y, const float* x, const float* w, const float* bias, int K, int N);
  void norm(const float* weight, const float* bias);  // ln_ = the block's norm of x_
  void block(int l);                   // x_ through block l at position_
  void attend(int l, const float* q);  // atty_ = attention of q over positions 0..position_

  GptConfig config_;
  BlockParts parts_;      // the block's parts (model/block_parts.hpp)
  int capacity_;
  int64_t kv_width_;      // KV·hs: the cached columns of one position (C for GPT-2)
  int64_t qkv_rows_, fc_rows_, hidden_;  // C + 2·KV·hs; the MLP's input rows (4C, or [gate | up] 2F); its width
  Buffer<float> params_;  // (num_parameters(config)) on the device
  ParamViews p_;          // views of params_
  kernels::Context& ctx_;
  int position_ = 0;
  Buffer<float> keys_, values_;        // (L, capacity, KV·hs) each
  Buffer<float> x_, ln_, atty_, proj_; // (C) each: residual stream, norm out, attention out, projection
  Buffer<float> qkv_;                  // (C + 2·KV·hs)
  Buffer<float> fch_, act_;            // (4C or 2F), (4C or F): the MLP's input product and its activation
  Buffer<float> scores_;               // (NH, capacity)
  Buffer<float> stats_;                // (2): the norm's statistics (mean and 1/σ; RMSNorm's 1/rms)
  Buffer<int32_t> rope_position_;      // (1): position_, for the rotary kernel
  Buffer<float> logits_;               // (Vp)
  std::vector<float> host_logits_;     // (Vp) logits_ in host memory: what step() returns
};

}  // namespace trident::model
