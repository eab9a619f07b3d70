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
  layers_ = tp_.slice.layers(config_);
  slots_.resize(1);
}

void Gpt2::zero_grad() { std::memset(grads_.data(), 0, grads_.size() * sizeof(float)); }

void Gpt2::set_slots(int slots) {
  if (slots == static_cast<int>(slots_.size())) return;
  slots_.clear();
  slots_.resize(slots);
  if (B_ > 0) {
    const int B = B_, T = T_;
    B_ = T_ = 0;
    prepare(B, T);
  }
}

// Everything backward needs of one block. With recompute every K blocks, a slot keeps only the
// outputs of the blocks that end a segment (the next segment's input, and the last block's for
// the head); the rest lives in K shared sets (work_), refilled by each segment's recompute.
void Gpt2::allocate_layer(LayerActivations& a, bool output_only) {
  const size_t BT = static_cast<size_t>(B_) * T_, C = config_.channels, Cl = C_local_;
  const size_t probs = static_cast<size_t>(B_) * heads_local_ * T_ * T_;
  a.residual3 = Buffer<float>(BT * C, kActs);
  if (output_only) return;
  a.ln1 = Buffer<float>(BT * C, kActs), a.ln1_mean = Buffer<float>(BT, kActs);
  a.ln1_var = Buffer<float>(BT, kActs), a.qkv = Buffer<float>(BT * 3 * Cl, kActs);
  if (!recompute_attention_) a.att = Buffer<float>(probs, kActs);  // selective: one shared buffer
  a.atty = Buffer<float>(BT * Cl, kActs), a.residual2 = Buffer<float>(BT * C, kActs);
  a.ln2 = Buffer<float>(BT * C, kActs), a.ln2_mean = Buffer<float>(BT, kActs);
  a.ln2_var = Buffer<float>(BT, kActs), a.fch = Buffer<float>(BT * 4 * Cl, kActs);
  a.fch_gelu = Buffer<float>(BT * 4 * Cl, kActs);
}

void Gpt2::allocate_slot(Slot& s) {
  const size_t BT = static_cast<size_t>(B_) * T_, C = config_.channels;
  s.layers.clear();
  s.layers.resize(layers_);
  for (int l = 0; l < layers_; ++l)
    if (!interval_ || keeps_output(l)) allocate_layer(s.layers[l], interval_ > 0);
  s.stage_input = Buffer<float>(BT * C, kActs);
  if (!tp_.slice.last_stage) return;
  s.lnf = Buffer<float>(BT * C, kActs), s.lnf_mean = Buffer<float>(BT, kActs);
  s.lnf_var = Buffer<float>(BT, kActs);
  s.logits = Buffer<float>(BT * vocab_.rows, kActs);
  s.losses = Buffer<float>(BT, kActs), s.log_normalizers = Buffer<float>(BT, kActs);
}

void Gpt2::prepare(int B, int T) {
  if (B == B_ && T == T_) return;
  B_ = B, T_ = T;
  for (Slot& s : slots_) allocate_slot(s);
  work_.clear();
  work_.resize(interval_);
  for (LayerActivations& a : work_) allocate_layer(a, false);
  if (recompute_attention_)
    shared_att_ = Buffer<float>(static_cast<size_t>(B) * heads_local_ * T * T, kActs);
  const size_t BT = static_cast<size_t>(B) * T, C = config_.channels, Cl = C_local_;
  const size_t probs = static_cast<size_t>(B) * heads_local_ * T * T;
  loss_scratch_ = Buffer<float>(3 * BT, kActs);
  scratch_c_ = Buffer<float>(BT * C, kActs);
  d_residual_ = Buffer<float>(BT * C, kActs), d_ln_ = Buffer<float>(BT * C, kActs);
  d_atty_ = Buffer<float>(BT * Cl, kActs), d_qkv_ = Buffer<float>(BT * 3 * Cl, kActs);
  d_fch_ = Buffer<float>(BT * 4 * Cl, kActs), d_fch_gelu_ = Buffer<float>(BT * 4 * Cl, kActs);
  d_att_ = Buffer<float>(probs, kActs);
}

float* Gpt2::stage_input(int slot) { return slots_.at(slot).stage_input.data(); }
const float* Gpt2::output(int slot) const { return slots_.at(slot).layers.back().residual3.data(); }
const float* Gpt2::losses(int slot) const { return slots_.at(slot).losses.data(); }
const float* Gpt2::logits(int slot) const { return slots_.at(slot).logits.data(); }
float* Gpt2::output_gradient() { return d_residual_.data(); }
const float* Gpt2::input_gradient() const { return d_residual_.data(); }

bool Gpt2::keeps_output(int l) const { return (l + 1) % interval_ == 0 || l == layers_ - 1; }

Gpt2::LayerActivations& Gpt2::layer_state(Slot& s, int l) {
  return interval_ ? work_[l % interval_] : s.layers[l];
}

float* Gpt2::block_output(Slot& s, int l) {
  return !interval_ || keeps_output(l) ? s.layers[l].residual3.data()
                                       : work_[l % interval_].residual3.data();
}

const float* Gpt2::block_input(Slot& s, int l) {
  return l == 0 ? s.stage_input.data() : block_output(s, l - 1);
}

// Block l of this stage (global block first_layer + l; parameters indexed by l).
void Gpt2::block_forward(LayerActivations& a, int l, const float* input, float* output) {
  const int BT = B_ * T_, C = config_.channels, Cl = C_local_;
  const size_t c = C, cl = Cl;
  kernels::layernorm_forward(ctx_, a.ln1.data(), a.ln1_mean.data(), a.ln1_var.data(), input,
                             p_.ln1w + l * c, p_.ln1b + l * c, BT, C);
  column_parallel_forward(ctx_, a.qkv.data(), a.ln1.data(), p_.qkvw + l * 3 * cl * c,
                          p_.qkvb + l * 3 * cl, BT, C, 3 * Cl);
  kernels::attention_forward(ctx_, a.atty.data(), probabilities(a), a.qkv.data(), B_, T_, Cl, heads_local_);
  row_parallel_forward(ctx_, tp_, a.residual2.data(), scratch_c_.data(), input, a.atty.data(),
                       p_.attprojw + l * c * cl, p_.attprojb + l * c, BT, Cl, C);
  kernels::layernorm_forward(ctx_, a.ln2.data(), a.ln2_mean.data(), a.ln2_var.data(),
                             a.residual2.data(), p_.ln2w + l * c, p_.ln2b + l * c, BT, C);
  column_parallel_forward(ctx_, a.fch.data(), a.ln2.data(), p_.fcw + l * 4 * cl * c,
                          p_.fcb + l * 4 * cl, BT, C, 4 * Cl);
  kernels::gelu_forward(ctx_, a.fch_gelu.data(), a.fch.data(), static_cast<size_t>(BT) * 4 * cl);
  row_parallel_forward(ctx_, tp_, output, scratch_c_.data(), a.residual2.data(),
                       a.fch_gelu.data(), p_.fcprojw + l * c * 4 * cl, p_.fcprojb + l * c, BT,
                       4 * Cl, C);
}

float* Gpt2::probabilities(LayerActivations& a) {
  return recompute_attention_ ? shared_att_.data() : a.att.data();
}


void Gpt2::head_forward(Slot& s, const int32_t* targets) {
  const int BT = B_ * T_, C = config_.channels;
  kernels::layernorm_forward(ctx_, s.lnf.data(), s.lnf_mean.data(), s.lnf_var.data(),
                             s.layers.back().residual3.data(), p_.lnfw, p_.lnfb, BT, C);
  column_parallel_forward(ctx_, s.logits.data(), s.lnf.data(), p_.wte, nullptr, BT, C, vocab_.rows);
  if (targets == nullptr) return;
  s.targets.assign(targets, targets + BT);
  vocab_parallel_cross_entropy(ctx_, tp_, vocab_, s.losses.data(), s.log_normalizers.data(),
                               loss_scratch_.data(), s.logits.data(), targets, BT);
}

float Gpt2::forward(int slot, const int32_t* inputs, const int32_t* targets, int B, int T) {
  prepare(B, T);
  Slot& s = slots_.at(slot);
  const int BT = B * T, C = config_.channels;
  if (tp_.slice.first_stage) {
    s.inputs.assign(inputs, inputs + BT);
    vocab_parallel_embedding_forward(ctx_, tp_, vocab_, s.stage_input.data(), inputs, p_.wte,
                                     p_.wpe, B, T, C);
  }
  for (int l = 0; l < layers_; ++l) block_forward(layer_state(s, l), l, block_input(s, l), block_output(s, l));
  if (!tp_.slice.last_stage) return 0.0f;
  head_forward(s, targets);
  if (targets == nullptr) return 0.0f;
  double sum = 0.0;
  for (int i = 0; i < BT; ++i) sum += s.losses[i];
  return static_cast<float>(sum / BT);
}

void Gpt2::block_backward(LayerActivations& a, int l, const float* input, float* dresidual) {
  const int BT = B_ * T_, C = config_.channels, Cl = C_local_;
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
  if (recompute_attention_)  // selective: the attention probabilities again, from the kept qkv
    kernels::attention_forward(ctx_, d_qkv_.data(), probabilities(a), a.qkv.data(), B_, T_, Cl, heads_local_);
  kernels::attention_backward(ctx_, d_qkv_.data(), d_att_.data(), d_atty_.data(), a.qkv.data(),
                              probabilities(a), B_, T_, Cl, heads_local_);
  column_parallel_backward(ctx_, tp_, d_ln_.data(), g_.qkvw + l * 3 * cl * c, g_.qkvb + l * 3 * cl,
                           d_qkv_.data(), a.ln1.data(), p_.qkvw + l * 3 * cl * c, BT, C, 3 * Cl);
  kernels::layernorm_backward(ctx_, dresidual, g_.ln1w + l * c, g_.ln1b + l * c, d_ln_.data(),
                              input, p_.ln1w + l * c, p_.ln1b + l * c, a.ln1_mean.data(),
                              a.ln1_var.data(), BT, C);
}

void Gpt2::head_backward(Slot& s, float loss_scale, float* dresidual) {
  const int BT = B_ * T_, C = config_.channels;
  float* dlogits = s.logits.data();  // in place: the logits are not needed after this
  kernels::crossentropy_backward(ctx_, dlogits, s.logits.data(), s.log_normalizers.data(),
                                 s.targets.data(), vocab_.begin, loss_scale / BT, BT, vocab_.valid,
                                 vocab_.rows);
  column_parallel_backward(ctx_, tp_, d_ln_.data(), g_.wte, nullptr, dlogits, s.lnf.data(), p_.wte,
                           BT, C, vocab_.rows);
  std::memset(dresidual, 0, d_residual_.size() * sizeof(float));
  kernels::layernorm_backward(ctx_, dresidual, g_.lnfw, g_.lnfb, d_ln_.data(),
                              s.layers.back().residual3.data(), p_.lnfw, p_.lnfb, s.lnf_mean.data(),
                              s.lnf_var.data(), BT, C);
}

void Gpt2::backward(int slot, float loss_scale, const std::function<void(int)>& on_final) {
  Slot& s = slots_.at(slot);
  float* dresidual = d_residual_.data();  // on non-last stages: the received gradient
  if (tp_.slice.last_stage) head_backward(s, loss_scale, dresidual);
  // Segments of K blocks from the last: with recompute, the segment's forward runs again from
  // its kept input — the same kernels on the same data, so the activations (and the gradients)
  // are bitwise the originals — then its blocks' backward. Without, one segment of all blocks.
  const int K = interval_ ? interval_ : layers_;
  for (int last = layers_ - 1; last >= 0;) {
    const int first = last / K * K;
    if (interval_)
      for (int l = first; l <= last; ++l) block_forward(layer_state(s, l), l, block_input(s, l), block_output(s, l));
    for (int l = last; l >= first; --l) {
      block_backward(layer_state(s, l), l, block_input(s, l), dresidual);
      if (on_final) on_final(l);
    }
    last = first - 1;
  }
  if (tp_.slice.first_stage)
    vocab_parallel_embedding_backward(ctx_, vocab_, g_.wte, g_.wpe, dresidual, s.inputs.data(), B_,
                                      T_, config_.channels);
  if (on_final) on_final(-1);
}

}  // namespace trident::model
