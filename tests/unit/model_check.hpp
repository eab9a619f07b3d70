// What the model tests share: a model's parameters set from GPT-2's initialisation in any
// precision (through the host, as a job sets them).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernel_check.hpp"

#include "model/transformer.hpp"
#include "model/params.hpp"

namespace trident::testing {

// init_params(seed) times `scale`, uploaded (rounded to a 16-bit model's type).
inline void initialise(model::Transformer& gpt, uint64_t seed, float scale = 1.0f) {
  std::vector<float> values(static_cast<size_t>(gpt.num_parameters()));
  model::init_params(gpt.config(), values.data(), seed, gpt.partition());
  for (float& v : values) v *= scale;
  gpt.upload_params(values.data());
}

// Tokens of a small test, a fixed function of (i, seed).
inline std::vector<int32_t> test_tokens(int n, unsigned seed, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 7 + seed * 13 + i * i) % vocab);
  return t;
}

// Every parameter tensor's gradient of a serial fp32 model of `config` (flash attention on or
// not) against central finite differences of its mean loss over a (2, 5) micro-batch; returns
// the analytic gradients. Weights 5x GPT-2's initialisation give gradients well above the
// finite-difference noise; h = 1e-3 keeps the truncation error of this now quite nonlinear model
// small, and atol covers the float rounding of the loss (~1e-4 after dividing by 2h).
inline std::vector<float> check_model_gradients(const model::GptConfig& config, bool flash) {
  kernels::Context ctx;
  model::Transformer gpt(config, ctx);
  if (flash) gpt.set_flash_attention(true);
  model::init_params(config, gpt.params(), 42);
  for (int64_t i = 0; i < gpt.num_parameters(); ++i) gpt.params()[i] *= 5.0f;
  const int B = 2, T = 5;
  const auto inputs = test_tokens(B * T, 1, config.vocab), targets = test_tokens(B * T, 2, config.vocab);
  gpt.zero_grad();
  gpt.forward(inputs.data(), targets.data(), B, T);
  gpt.backward(1.0f);
  const std::vector<float> analytic(gpt.grads(), gpt.grads() + gpt.num_parameters());
  std::vector<float> params(gpt.params(), gpt.params() + gpt.num_parameters());
  auto loss = [&] {
    std::memcpy(gpt.params(), params.data(), params.size() * sizeof(float));
    double sum = 0;
    gpt.forward(inputs.data(), targets.data(), B, T);
    for (int i = 0; i < B * T; ++i) sum += gpt.losses()[i];
    return sum / (B * T);
  };
  int64_t offset = 0;
  for (const auto& spec : model::param_specs(config)) {
    const int64_t n = spec.count();
    if (n == 0) continue;  // a slot the architecture leaves empty (Llama's biases, a tied head)
    std::vector<float> x(params.begin() + offset, params.begin() + offset + n);
    std::vector<float> g(analytic.begin() + offset, analytic.begin() + offset + n);
    auto tensor_loss = [&] {
      std::copy(x.begin(), x.end(), params.begin() + offset);
      return loss();
    };
    check_gradient(x, g, tensor_loss, spec.name, 1e-3f, 5e-2, 5e-3, 24);
    std::copy(x.begin(), x.end(), params.begin() + offset);
    offset += n;
  }
  return analytic;
}

}  // namespace trident::testing
