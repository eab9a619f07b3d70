// Parameter layout and initialisation.
#include "model/params.hpp"

#include <cmath>

#include "core/random.hpp"

namespace trident::model {

int padded_vocab_for(int vocab) { return (vocab + 127) / 128 * 128; }

double training_flops_per_token(const GptConfig& c, int seq_len) {
  const double C = c.channels, L = c.layers;
  const double matmul_weights = L * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + c.padded_vocab * C;
  return 6.0 * matmul_weights + 12.0 * L * seq_len * C;
}

int64_t ParamSpec::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::array<ParamSpec, kNumParamTensors> param_specs(const GptConfig& config) {
  const int64_t V = config.padded_vocab, T = config.max_seq_len, L = config.layers;
  const int64_t C = config.channels;
  return {{{"wte", {V, C}, true},
           {"wpe", {T, C}, true},
           {"blocks.ln1w", {L, C}, false},
           {"blocks.ln1b", {L, C}, false},
           {"blocks.qkvw", {L, 3 * C, C}, true},
           {"blocks.qkvb", {L, 3 * C}, false},
           {"blocks.attprojw", {L, C, C}, true},
           {"blocks.attprojb", {L, C}, false},
           {"blocks.ln2w", {L, C}, false},
           {"blocks.ln2b", {L, C}, false},
           {"blocks.fcw", {L, 4 * C, C}, true},
           {"blocks.fcb", {L, 4 * C}, false},
           {"blocks.fcprojw", {L, C, 4 * C}, true},
           {"blocks.fcprojb", {L, C}, false},
           {"lnfw", {C}, false},
           {"lnfb", {C}, false}}};
}

int64_t num_parameters(const GptConfig& config) {
  int64_t total = 0;
  for (const ParamSpec& spec : param_specs(config)) total += spec.count();
  return total;
}

ParamViews param_views(const GptConfig& config, float* base) {
  ParamViews views{};
  float** ordered[] = {&views.wte,     &views.wpe,      &views.ln1w,    &views.ln1b,
                       &views.qkvw,    &views.qkvb,     &views.attprojw, &views.attprojb,
                       &views.ln2w,    &views.ln2b,     &views.fcw,     &views.fcb,
                       &views.fcprojw, &views.fcprojb,  &views.lnfw,    &views.lnfb};
  const auto specs = param_specs(config);
  float* at = base;
  for (int i = 0; i < kNumParamTensors; ++i) {
    *ordered[i] = at;
    at += specs[i].count();
  }
  return views;
}

void init_params(const GptConfig& config, float* params, uint64_t seed) {
  const auto specs = param_specs(config);
  const double residual_std = 0.02 / std::sqrt(2.0 * config.layers);
  float* at = params;
  for (int t = 0; t < kNumParamTensors; ++t) {
    const ParamSpec& spec = specs[t];
    const int64_t n = spec.count();
    const bool is_ln_weight = spec.name == "blocks.ln1w" || spec.name == "blocks.ln2w" ||
                              spec.name == "lnfw";
    const bool is_bias = spec.name.back() == 'b' && !spec.weight_decay;
    const bool residual = spec.name == "blocks.attprojw" || spec.name == "blocks.fcprojw";
    const double stddev = residual ? residual_std : 0.02;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      if (is_ln_weight) at[i] = 1.0f;
      else if (is_bias) at[i] = 0.0f;
      else at[i] = static_cast<float>(stddev * trident::normal_at(seed, t, i));
    }
    at += n;
  }
}

}  // namespace trident::model
