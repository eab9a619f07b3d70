// One-token-at-a-time forward of GPT-2 with a key/value cache.
#include "model/kv_cache.hpp"

#include <stdexcept>

#include "kernels/backend.hpp"
#include "tensor/tensor.hpp"

namespace trident::model {
namespace {

constexpr MemoryCategory kActs = MemoryCategory::Activations;

}  // namespace

KvDecoder::KvDecoder(const GptConfig& config, const float* params, kernels::Context& ctx)
    : config_(config), ctx_(ctx) {
  const size_t C = config.channels, L = config.layers, T = config.max_seq_len;
  kernels::Backend& device = kernels::backend_of(ctx);
  params_ = Buffer<float>(static_cast<size_t>(num_parameters(config)), MemoryCategory::Parameters, device,
                          MemoryKind::device);
  kernels::upload(ctx_, params_.view(), params);
  p_ = param_views(config, params_.data());
  auto buffer = [&device](size_t n) { return Buffer<float>(n, kActs, device, MemoryKind::device); };
  keys_ = buffer(L * T * C), values_ = buffer(L * T * C);
  x_ = buffer(C), ln_ = buffer(C), atty_ = buffer(C), proj_ = buffer(C), qkv_ = buffer(3 * C);
  fch_ = buffer(4 * C), gelu_ = buffer(4 * C);
  scores_ = buffer(static_cast<size_t>(config.heads) * T);
  stats_ = buffer(2), logits_ = buffer(config.padded_vocab);
  host_logits_.resize(config.padded_vocab);
}

const float* KvDecoder::step(int token) {
  const int C = config_.channels;
  if (position_ >= config_.max_seq_len)
    throw std::out_of_range("the context is full: the model has " + std::to_string(config_.max_seq_len) + " positions");
  if (token < 0 || token >= config_.vocab)
    throw std::out_of_range("token " + std::to_string(token) + " is outside the vocabulary");
  const Tensor wte = on_device(p_.wte + static_cast<size_t>(token) * C, {C});
  const Tensor wpe = on_device(p_.wpe + static_cast<size_t>(position_) * C, {C});
  kernels::residual_forward(ctx_, x_.view(), wte, wpe);
  for (int l = 0; l < config_.layers; ++l) block(l);
  layernorm(p_.lnfw, p_.lnfb);
  linear(logits_.data(), ln_.data(), p_.wte, nullptr, C, config_.padded_vocab);
  ++position_;
  kernels::download(ctx_, host_logits_.data(), logits_.view());
  return host_logits_.data();
}

Tensor KvDecoder::on_device(const float* data, Shape shape) const { return view(data, shape, params_.device()); }

// y (N) = x (K) · wᵀ + bias, one row of the model's linear layer (w: (N, K)).
void KvDecoder::linear(float* y, const float* x, const float* w, const float* bias, int K, int N) {
  kernels::linear_forward(ctx_, on_device(y, {1, N}), on_device(x, {1, K}), on_device(w, {N, K}), on_device(bias, {N}));
}

// ln_ (C) = LayerNorm of x_ (one row) with weight and bias (C); its statistics in stats_.
void KvDecoder::layernorm(const float* weight, const float* bias) {
  const int C = config_.channels;
  kernels::layernorm_forward(ctx_, ln_.view(), on_device(&stats_[0], {1}), on_device(&stats_[1], {1}),
                             x_.view({1, C}), on_device(weight, {C}), on_device(bias, {C}));
}

// The block of model/gpt2.cpp at one position: x += attn(ln1(x)); x += mlp(ln2(x)).
void KvDecoder::block(int l) {
  const int C = config_.channels;
  const size_t c = C, at = (static_cast<size_t>(l) * config_.max_seq_len + position_) * c;
  layernorm(p_.ln1w + l * c, p_.ln1b + l * c);
  linear(qkv_.data(), ln_.data(), p_.qkvw + l * 3 * c * c, p_.qkvb + l * 3 * c, C, 3 * C);
  kernels::copy(ctx_, view(&keys_[at], c), view(&qkv_[c], c));        // k
  kernels::copy(ctx_, view(&values_[at], c), view(&qkv_[2 * c], c));  // v
  attend(l, qkv_.data());
  linear(proj_.data(), atty_.data(), p_.attprojw + l * c * c, p_.attprojb + l * c, C, C);
  kernels::add_inplace(ctx_, x_.view(), proj_.view());
  layernorm(p_.ln2w + l * c, p_.ln2b + l * c);
  linear(fch_.data(), ln_.data(), p_.fcw + l * 4 * c * c, p_.fcb + l * 4 * c, C, 4 * C);
  kernels::gelu_forward(ctx_, gelu_.view(), fch_.view());
  linear(proj_.data(), gelu_.data(), p_.fcprojw + l * 4 * c * c, p_.fcprojb + l * c, 4 * C, C);
  kernels::add_inplace(ctx_, x_.view(), proj_.view());
}

// Causal attention of the newest position over positions 0..position_ of layer l's cache.
void KvDecoder::attend(int l, const float* q) {
  const int C = config_.channels, positions = position_ + 1;
  const size_t layer = static_cast<size_t>(l) * config_.max_seq_len * C;
  kernels::attention_decode(ctx_, atty_.view(), on_device(scores_.data(), {config_.heads, positions}),
                            on_device(q, {C}), on_device(&keys_[layer], {positions, C}),
                            on_device(&values_[layer], {positions, C}), config_.heads);
}

}  // namespace trident::model
