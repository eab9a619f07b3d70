// GPT-2 with explicit forward and backward over one micro-batch: the serial model, and, given a
// tensor group of p ranks, this rank's part of the tensor-parallel model (heads, MLP rows and
// vocabulary split as model/tensor_parallel.hpp states). Parameters and gradients each live in one
// allocation laid out as model/params.hpp says; activations in per-layer buffers sized for the
// micro-batch shape (B, T) and reallocated only when that shape changes.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "model/tensor_parallel.hpp"
#include "tensor/buffer.hpp"

namespace trident::model {

class Gpt2 {
 public:
  Gpt2(const GptConfig& config, kernels::Context& ctx, const TensorGroup& tensor_group = {});
  const TensorGroup& tensor_group() const { return tp_; }

  const GptConfig& config() const { return config_; }
  int64_t num_parameters() const { return static_cast<int64_t>(params_.size()); }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const ParamViews& param_views() const { return p_; }

  // inputs, targets (B, T) token ids. Returns the mean cross-entropy over the B·T targets
  // (targets == nullptr: logits only, returns 0). Keeps what backward needs.
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T);
  // Per-position losses (B·T) of the last forward.
  const float* losses() const { return losses_.data(); }
  // This rank's logits (B, T, Vp/p) of the last forward (overwritten by backward).
  const float* logits() const { return logits_.data(); }

  // grads += ∂(loss_scale · mean loss of the last forward)/∂θ. on_final(l), if given, is called
  // as soon as block l's gradients are final for this backward (l = L−1 … 0), and on_final(-1)
  // at the end, when the embeddings' and the final LayerNorm's are: the hook a data-parallel
  // reducer uses to start communicating while backward goes on.
  void backward(float loss_scale, const std::function<void(int)>& on_final = {});
  void zero_grad();

 private:
  struct LayerActivations {
    Buffer<float> ln1, ln1_mean, ln1_var;  // (B,T,C), (B,T), (B,T)
    Buffer<float> qkv;                      // (B,T,3C/p): q, k, v of this rank's heads
    Buffer<float> att;                      // (B,NH/p,T,T)
    Buffer<float> atty;                     // (B,T,C/p) attention output before the projection
    Buffer<float> residual2;                // (B,T,C) after the attention branch
    Buffer<float> ln2, ln2_mean, ln2_var;  // (B,T,C), (B,T), (B,T)
    Buffer<float> fch, fch_gelu;            // (B,T,4C/p) each
    Buffer<float> residual3;                // (B,T,C) block output
  };
  void ensure_activations(int B, int T);
  void block_forward(int layer, const float* input);
  void block_backward(int layer, const float* input, float* dresidual);

  GptConfig config_;
  kernels::Context& ctx_;
  TensorGroup tp_;
  VocabSlice vocab_;
  int C_local_ = 0, heads_local_ = 0;  // channels and heads of this rank's attention heads
  Buffer<float> params_, grads_;
  ParamViews p_{}, g_{};

  int B_ = 0, T_ = 0;
  std::vector<int32_t> inputs_, targets_;      // (B,T) copies for backward
  Buffer<float> encoded_;                      // (B,T,C)
  std::vector<LayerActivations> layers_;
  Buffer<float> lnf_, lnf_mean_, lnf_var_;    // (B,T,C), (B,T), (B,T)
  Buffer<float> logits_;                       // (B,T,Vp/p); dlogits in place during backward
  Buffer<float> losses_;                       // (B,T)
  Buffer<float> log_normalizers_;              // (B,T) of the softmax, for backward
  Buffer<float> loss_scratch_;                 // (3·B·T) partial maxes and sums
  Buffer<float> scratch_c_;                    // (B,T,C) row-parallel partial sums
  // Backward scratch, shared by all layers.
  Buffer<float> d_residual_, d_ln_;            // (B,T,C)
  Buffer<float> d_atty_;                       // (B,T,C/p)
  Buffer<float> d_qkv_;                        // (B,T,3C/p)
  Buffer<float> d_fch_, d_fch_gelu_;           // (B,T,4C/p)
  Buffer<float> d_att_;                        // (B,NH/p,T,T)
};

}  // namespace trident::model
