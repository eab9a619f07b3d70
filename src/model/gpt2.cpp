// GPT-2 forward and backward over the tensor-parallel layers of model/tensor_parallel.hpp
// (the serial model is the tensor group of one rank). Kernel math: kernels/kernels.hpp.
#include "model/gpt2.hpp"

#include <algorithm>
#include <cstring>

namespace trident::model {
namespace {

using kernels::Context;
constexpr MemoryCategory kActs = MemoryCategory::Activations;

}  // namespace

Gpt2::Gpt2(const GptConfig& config, Context& ctx, const TensorGroup& tensor_group)
    : config_(config),
      ctx_(ctx),
      tp_(tensor_group),
      vocab_(vocab_slice(config, tensor_group.slice)),
      params_(static_cast<size_t>(model::num_parameters(config, tensor_group.slice)), MemoryCategory::Parameters),
      grads_(static_cast<size_t>(model::num_parameters(config, tensor_group.slice)), MemoryCategory::Gradients) {
  p_ = model::param_views(config_, params_.data(), tp_.slice);
  g_ = model::param_views(config_, grads_.data(), tp_.slice);
  C_local_ = config_.channels / tp_.slice.size;
  heads_local_ = config_.heads / tp_.slice.size;
}

void Gpt2::zero_grad() { std::memset(grads_.data(), 0, grads_.size() * sizeof(float)); }

void Gpt2::ensure_activations(int B, int T) {
  if (B == B_ && T == T_) return;
  B_ = B, T_ = T;
  const size_t BT = static_cast<size_t>(B) * T, C = config_.channels, Cl = C_local_;
  const size_t probs = static_cast<size_t>(B) * heads_local_ * T * T;
  layers_.clear();
  layers_.resize(config_.layers);
  for (LayerActivations& a : layers_) {
    a.ln1 = Buffer<float>(BT * C, kActs), a.ln1_mean = Buffer<float>(BT, kActs);
    a.ln1_var = Buffer<float>(BT, kActs), a.qkv = Buffer<float>(BT * 3 * Cl, kActs);
    a.att = Buffer<float>(probs, kActs);
    a.atty = Buffer<float>(BT * Cl, kActs), a.residual2 = Buffer<float>(BT * C, kActs);
    a.ln2 = Buffer<float>(BT * C, kActs), a.ln2_mean = Buffer<float>(BT, kActs);
    a.ln2_var = Buffer<float>(BT, kActs), a.fch = Buffer<float>(BT * 4 * Cl, kActs);
    a.fch_gelu = Buffer<float>(BT * 4 * Cl, kActs), a.residual3 = Buffer<float>(BT * C, kActs);
  }
  encoded_ = Buffer<float>(BT * C, kActs);
  lnf_ = Buffer<float>(BT * C, kActs), lnf_mean_ = Buffer<float>(BT, kActs);
  lnf_var_ = Buffer<float>(BT, kActs);
  logits_ = Buffer<float>(BT * vocab_.rows, kActs);
  losses_ = Buffer<float>(BT, kActs);
  log_normalizers_ = Buffer<float>(BT, kActs);
  loss_scratch_ = Buffer<float>(3 * BT, kActs);
  scratch_c_ = Buffer<float>(BT * C, kActs);
  d_residual_ = Buffer<float>(BT * C, kActs), d_ln_ = Buffer<float>(BT * C, kActs);
  d_atty_ = Buffer<float>(BT * Cl, kActs), d_qkv_ = Buffer<float>(BT * 3 * Cl, kActs);
  d_fch_ = Buffer<float>(BT * 4 * Cl, kActs), d_fch_gelu_ = Buffer<float>(BT * 4 * Cl, kActs);
  d_att_ = Buffer<float>(probs, kActs);
}

void Gpt2::block_forward(int l, const float* input) {
  const int BT = B_ * T_, C = config_.channels, Cl = C_local_;
  LayerActivations& a = layers_[l];
  const size_t c = C, cl = Cl;
  kernels::layernorm_forward(ctx_, a.ln1.data(), a.ln1_mean.data(), a.ln1_var.data(), input,
                             p_.ln1w + l * c, p_.ln1b + l * c, BT, C);
  column_parallel_forward(ctx_, a.qkv.data(), a.ln1.data(), p_.qkvw + l * 3 * cl * c,
                          p_.qkvb + l * 3 * cl, BT, C, 3 * Cl);
  kernels::attention_forward(ctx_, a.atty.data(), a.att.data(), a.qkv.data(), B_, T_, Cl, heads_local_);
  row_parallel_forward(ctx_, tp_, a.residual2.data(), scratch_c_.data(), input, a.atty.data(),
                       p_.attprojw + l * c * cl, p_.attprojb + l * c, BT, Cl, C);
  kernels::layernorm_forward(ctx_, a.ln2.data(), a.ln2_mean.data(), a.ln2_var.data(),
                             a.residual2.data(), p_.ln2w + l * c, p_.ln2b + l * c, BT, C);
  column_parallel_forward(ctx_, a.fch.data(), a.ln2.data(), p_.fcw + l * 4 * cl * c,
                          p_.fcb + l * 4 * cl, BT, C, 4 * Cl);
  kernels::gelu_forward(ctx_, a.fch_gelu.data(), a.fch.data(), static_cast<size_t>(BT) * 4 * cl);
  row_parallel_forward(ctx_, tp_, a.residual3.data(), scratch_c_.data(), a.residual2.data(),
                       a.fch_gelu.data(), p_.fcprojw + l * c * 4 * cl, p_.fcprojb + l * c, BT,
                       4 * Cl, C);
}

float Gpt2::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
  ensure_activations(B, T);
  const int BT = B * T, C = config_.channels;
  inputs_.assign(inputs, inputs + BT);
  vocab_parallel_embedding_forward(ctx_, tp_, vocab_, encoded_.data(), inputs, p_.wte, p_.wpe, B, T, C);
  for (int l = 0; l < config_.layers; ++l)
    block_forward(l, l == 0 ? encoded_.data() : layers_[l - 1].residual3.data());
  const float* last = layers_.back().residual3.data();
  kernels::layernorm_forward(ctx_, lnf_.data(), lnf_mean_.data(), lnf_var_.data(), last, p_.lnfw,
                             p_.lnfb, BT, C);
  column_parallel_forward(ctx_, logits_.data(), lnf_.data(), p_.wte, nullptr, BT, C, vocab_.rows);
  if (targets == nullptr) return 0.0f;
  targets_.assign(targets, targets + BT);
  vocab_parallel_cross_entropy(ctx_, tp_, vocab_, losses_.data(), log_normalizers_.data(),
                               loss_scratch_.data(), logits_.data(), targets, BT);
  double sum = 0.0;
  for (int i = 0; i < BT; ++i) sum += losses_[i];
  return static_cast<float>(sum / BT);
}

void Gpt2::block_backward(int l, const float* input, float* dresidual) {
  const int BT = B_ * T_, C = config_.channels, Cl = C_local_;
  LayerActivations& a = layers_[l];
  const size_t c = C, cl = Cl;
  // MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
  row_parallel_backward(ctx_, d_fch_gelu_.data(), g_.fcprojw + l * c * 4 * cl, g_.fcprojb + l * c,
                        dresidual, a.fch_gelu.data(), p_.fcprojw + l * c * 4 * cl, BT, 4 * Cl, C);
  kernels::gelu_backward(ctx_, d_fch_.data(), a.fch.data(), d_fch_gelu_.data(), static_cast<size_t>(BT) * 4 * cl);
  column_parallel_backward(ctx_, tp_, d_ln_.data(), g_.fcw + l * 4 * cl * c, g_.fcb + l * 4 * cl,
                           d_fch_.data(), a.ln2.data(), p_.fcw + l * 4 * cl * c, BT, C, 4 * Cl);
  kernels::layernorm_backward(ctx_, dresidual, g_.ln2w + l * c, g_.ln2b + l * c, d_ln_.data(),
                              a.residual2.data(), p_.ln2w + l * c, p_.ln2b + l * c,
                              a.ln2_mean.data(), a.ln2_var.data(), BT, C);
  // Attention branch: residual2 = input + attproj(attention(qkv(ln1(input))))
  row_parallel_backward(ctx_, d_atty_.data(), g_.attprojw + l * c * cl, g_.attprojb + l * c,
                        dresidual, a.atty.data(), p_.attprojw + l * c * cl, BT, Cl, C);
  kernels::attention_backward(ctx_, d_qkv_.data(), d_att_.data(), d_atty_.data(), a.qkv.data(),
                              a.att.data(), B_, T_, Cl, heads_local_);
  column_parallel_backward(ctx_, tp_, d_ln_.data(), g_.qkvw + l * 3 * cl * c, g_.qkvb + l * 3 * cl,
                           d_qkv_.data(), a.ln1.data(), p_.qkvw + l * 3 * cl * c, BT, C, 3 * Cl);
  kernels::layernorm_backward(ctx_, dresidual, g_.ln1w + l * c, g_.ln1b + l * c, d_ln_.data(),
                              input, p_.ln1w + l * c, p_.ln1b + l * c, a.ln1_mean.data(),
                              a.ln1_var.data(), BT, C);
}

void Gpt2::backward(float loss_scale, const std::function<void(int)>& on_final) {
  const int BT = B_ * T_, C = config_.channels;
  float* dlogits = logits_.data();  // in place: the logits are not needed after this
  kernels::crossentropy_backward(ctx_, dlogits, logits_.data(), log_normalizers_.data(),
                                 targets_.data(), vocab_.begin, loss_scale / BT, BT, vocab_.valid,
                                 vocab_.rows);
  column_parallel_backward(ctx_, tp_, d_ln_.data(), g_.wte, nullptr, dlogits, lnf_.data(), p_.wte,
                           BT, C, vocab_.rows);
  float* dresidual = d_residual_.data();
  std::memset(dresidual, 0, d_residual_.size() * sizeof(float));
  kernels::layernorm_backward(ctx_, dresidual, g_.lnfw, g_.lnfb, d_ln_.data(),
                              layers_.back().residual3.data(), p_.lnfw, p_.lnfb, lnf_mean_.data(),
                              lnf_var_.data(), BT, C);
  for (int l = config_.layers - 1; l >= 0; --l) {
    block_backward(l, l == 0 ? encoded_.data() : layers_[l - 1].residual3.data(), dresidual);
    if (on_final) on_final(l);
  }
  vocab_parallel_embedding_backward(ctx_, vocab_, g_.wte, g_.wpe, dresidual, inputs_.data(), B_, T_, C);
  if (on_final) on_final(-1);
}

}  // namespace trident::model
