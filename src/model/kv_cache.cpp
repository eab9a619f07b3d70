// One-token-at-a-time forward of the model with a key/value cache.
#include "model/kv_cache.hpp"

#include <stdexcept>

#include "kernels/backend.hpp"
#include "tensor/tensor.hpp"

namespace trident::model {
namespace {

constexpr MemoryCategory kActs = MemoryCategory::Activations;

int capacity_of(const GptConfig& config, int capacity) {
  return capacity > 0 && capacity < config.max_seq_len ? capacity : config.max_seq_len;
}

}  // namespace

int64_t KvDecoder::buffer_bytes(const GptConfig& config, int capacity) {
  const int64_t C = config.channels, L = config.layers, T = capacity_of(config, capacity);
  const int64_t floats = num_parameters(config) + 2 * L * T * kv_channels(config)  // parameters, keys, values
                         + 4 * C + qkv_rows(config) + fc_rows(config) + mlp_hidden(config)  // x_ … act_
                         + int64_t(config.heads) * T + 2 + config.padded_vocab;             // scores_, stats_, logits_
  return floats * int64_t(sizeof(float)) + int64_t(sizeof(int32_t));                        // rope_position_
}

KvDecoder::KvDecoder(const GptConfig& config, const float* params, kernels::Context& ctx, int capacity)
    : config_(config),
      parts_(block_parts(config)),
      capacity_(capacity_of(config, capacity)),
      kv_width_(kv_channels(config)),
      qkv_rows_(qkv_rows(config)),
      fc_rows_(fc_rows(config)),
      hidden_(mlp_hidden(config)),
      ctx_(ctx) {
  const size_t C = config.channels, L = config.layers, T = capacity_;
  kernels::Backend& device = kernels::backend_of(ctx);
  params_ = Buffer<float>(static_cast<size_t>(num_parameters(config)), MemoryCategory::Parameters, device,
                          MemoryKind::device);
  kernels::upload(ctx_, params_.view(), params);
  p_ = param_views(config, params_.data());
  auto buffer = [&device](size_t n) { return Buffer<float>(n, kActs, device, MemoryKind::device); };
  keys_ = buffer(L * T * kv_width_), values_ = buffer(L * T * kv_width_);
  x_ = buffer(C), ln_ = buffer(C), atty_ = buffer(C), proj_ = buffer(C), qkv_ = buffer(qkv_rows_);
  fch_ = buffer(fc_rows_), act_ = buffer(hidden_);
  scores_ = buffer(static_cast<size_t>(config.heads) * T);
  stats_ = buffer(2), logits_ = buffer(config.padded_vocab);
  rope_position_ = Buffer<int32_t>(1, kActs, device, MemoryKind::device);
  host_logits_.resize(config.padded_vocab);
}

const float* KvDecoder::step(int token) {
  const int C = config_.channels;
  if (position_ >= capacity_)
    throw std::out_of_range("the context is full: the cache holds " + std::to_string(capacity_) + " positions");
  if (token < 0 || token >= config_.vocab)
    throw std::out_of_range("token " + std::to_string(token) + " is outside the vocabulary");
  const Tensor wte = on_device(p_.wte + static_cast<size_t>(token) * C, {C});
  if (parts_.learned_positions()) {
    kernels::residual_forward(ctx_, x_.view(), wte, on_device(p_.wpe + static_cast<size_t>(position_) * C, {C}));
  } else {  // the token's embedding; its position enters through the rotary kernel, in the blocks
    kernels::copy(ctx_, x_.view(), wte);
    const int32_t at = position_;
    kernels::upload(ctx_, rope_position_.view(), &at);
  }
  for (int l = 0; l < config_.layers; ++l) block(l);
  norm(p_.lnfw, p_.lnfb);
  linear(logits_.data(), ln_.data(), tied_head(config_) ? p_.wte : p_.head, nullptr, C, config_.padded_vocab);
  ++position_;
  kernels::download(ctx_, host_logits_.data(), logits_.view());
  return host_logits_.data();
}

Tensor KvDecoder::on_device(const float* data, Shape shape) const { return view(data, shape, params_.device()); }

// y (N) = x (K) · wᵀ + bias, one row of the model's linear layer (w: (N, K); the bias where the
// parts have biases).
void KvDecoder::linear(float* y, const float* x, const float* w, const float* bias, int K, int N) {
  kernels::linear_forward(ctx_, on_device(y, {1, N}), on_device(x, {1, K}), on_device(w, {N, K}),
                          on_device(parts_.biases ? bias : nullptr, {N}));
}

// ln_ (C) = the block's norm of x_ (one row) with its weight (and bias) (C).
void KvDecoder::norm(const float* weight, const float* bias) {
  const int C = config_.channels;
  norm_forward(ctx_, parts_, ln_.view({1, C}), on_device(&stats_[0], {1}), on_device(&stats_[1], {1}), x_.view({1, C}),
               on_device(weight, {C}), on_device(bias, {C}));
}

// The block of model/transformer.cpp at one position: x += attn(norm1(x)); x += mlp(norm2(x)).
void KvDecoder::block(int l) {
  const int C = config_.channels;
  const size_t c = C, kv = static_cast<size_t>(kv_width_);
  const size_t at = (static_cast<size_t>(l) * capacity_ + position_) * kv;
  norm(p_.ln1w + l * c, p_.ln1b + l * c);
  linear(qkv_.data(), ln_.data(), p_.qkvw + l * qkv_rows_ * c, p_.qkvb + l * qkv_rows_, C, static_cast<int>(qkv_rows_));
  // Rotary positions: q and k rotated at this position, as the training forward does (before the cache).
  rotate_positions(ctx_, parts_, qkv_.view({1, 1, qkv_rows_}), rope_position_.view(), config_.heads, kv_heads(config_),
                   false);
  kernels::copy(ctx_, view(&keys_[at], kv), view(&qkv_[c], kv));           // k
  kernels::copy(ctx_, view(&values_[at], kv), view(&qkv_[c + kv], kv));    // v
  attend(l, qkv_.data());
  linear(proj_.data(), atty_.data(), p_.attprojw + l * c * c, p_.attprojb + l * c, C, C);
  kernels::add_inplace(ctx_, x_.view(), proj_.view());
  norm(p_.ln2w + l * c, p_.ln2b + l * c);
  linear(fch_.data(), ln_.data(), p_.fcw + l * fc_rows_ * c, p_.fcb + l * fc_rows_, C, static_cast<int>(fc_rows_));
  activation_forward(ctx_, parts_, act_.view({1, hidden_}), fch_.view({1, fc_rows_}));
  linear(proj_.data(), act_.data(), p_.fcprojw + l * hidden_ * c, p_.fcprojb + l * c, static_cast<int>(hidden_), C);
  kernels::add_inplace(ctx_, x_.view(), proj_.view());
}

// Causal attention of the newest position over positions 0..position_ of layer l's cache.
void KvDecoder::attend(int l, const float* q) {
  const int C = config_.channels, positions = position_ + 1, kv = static_cast<int>(kv_width_);
  const size_t layer = static_cast<size_t>(l) * capacity_ * kv;
  kernels::attention_decode(ctx_, atty_.view(), on_device(scores_.data(), {config_.heads, positions}),
                            on_device(q, {C}), on_device(&keys_[layer], {positions, kv}),
                            on_device(&values_[layer], {positions, kv}), config_.heads);
}

}  // namespace trident::model
