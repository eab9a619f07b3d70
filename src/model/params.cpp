// Parameter layout and initialisation.
#include "model/params.hpp"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/random.hpp"

namespace trident::model {

int padded_vocab_for(int vocab) { return (vocab + 127) / 128 * 128; }

std::string config_problem(const GptConfig& c) {
  const std::string sizes = "layers " + std::to_string(c.layers) + ", heads " + std::to_string(c.heads) + ", hidden " +
                            std::to_string(c.channels) + ", vocab " + std::to_string(c.vocab) + " (padded " +
                            std::to_string(c.padded_vocab) + "), seq_len " + std::to_string(c.max_seq_len);
  if (c.max_seq_len < 1 || c.vocab < 1 || c.layers < 1 || c.heads < 1 || c.channels < 1 || c.padded_vocab < c.vocab ||
      c.channels % c.heads != 0)
    return "inconsistent model shape (" + sizes + "): every size must be at least 1, the padded vocabulary at least "
           "the vocabulary, and hidden a multiple of heads";
  // num_parameters in long double: the int64 count of a lying shape may overflow.
  const long double C = c.channels, parameters = (static_cast<long double>(c.padded_vocab) + c.max_seq_len + 2) * C +
                                                 static_cast<long double>(c.layers) * (12 * C * C + 13 * C);
  if (parameters > static_cast<long double>(kMaxParameters))
    return "model shape (" + sizes + ") of " + std::to_string(static_cast<double>(parameters)) +
           " parameters, more than the " + std::to_string(kMaxParameters) + " any run can hold";
  return "";
}

double training_flops_per_token(const GptConfig& c, int seq_len) {
  const double C = c.channels, L = c.layers;
  const double matmul_weights = L * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + c.padded_vocab * C;
  return 6.0 * matmul_weights + 12.0 * L * seq_len * C;
}

Partition stage_partition(const std::vector<int>& stage_layers, int stage, int tp_rank, int tp_size) {
  Partition part;
  part.rank = tp_rank, part.size = tp_size;
  for (int s = 0; s < stage; ++s) part.first_layer += stage_layers[s];
  part.num_layers = stage_layers[stage];
  part.first_stage = stage == 0;
  part.last_stage = stage == static_cast<int>(stage_layers.size()) - 1;
  return part;
}

Partition interleaved_partition(const std::vector<int>& virtual_layers, int stages, int stage, int tp_rank, int tp_size) {
  const int chunks = static_cast<int>(virtual_layers.size()) / stages;
  if (chunks < 1 || static_cast<int>(virtual_layers.size()) != chunks * stages)
    throw std::invalid_argument(std::to_string(virtual_layers.size()) + " virtual stages for " + std::to_string(stages) +
                                " stages");
  Partition part;
  part.rank = tp_rank, part.size = tp_size;
  part.num_layers = 0;
  for (int j = 0; j < chunks; ++j) {
    const int u = j * stages + stage;
    part.chunk_first.push_back(std::accumulate(virtual_layers.begin(), virtual_layers.begin() + u, 0));
    part.chunk_blocks.push_back(virtual_layers[u]);
    part.num_layers += virtual_layers[u];
  }
  part.first_layer = part.chunk_first[0];
  part.first_stage = stage == 0;
  part.last_stage = stage == stages - 1;
  return part;
}

int64_t ParamSpec::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::array<ParamSpec, kNumParamTensors> param_specs(const GptConfig& config,
                                                    const Partition& slice) {
  const int64_t V = slice.first_stage || slice.last_stage ? config.padded_vocab : 0;
  const int64_t T = slice.first_stage ? config.max_seq_len : 0, L = slice.layers(config);
  const int64_t C = config.channels, p = slice.size, C_final = slice.last_stage ? C : 0;
  return {{{"wte", {V / p, C}, true, true, true},
           {"wpe", {T, C}, true, false},
           {"blocks.ln1w", {L, C}, false, false},
           {"blocks.ln1b", {L, C}, false, false},
           {"blocks.qkvw", {L, 3 * C / p, C}, true, true, true},
           {"blocks.qkvb", {L, 3 * C / p}, false, true},
           {"blocks.attprojw", {L, C, C / p}, true, true, true},
           {"blocks.attprojb", {L, C}, false, false},
           {"blocks.ln2w", {L, C}, false, false},
           {"blocks.ln2b", {L, C}, false, false},
           {"blocks.fcw", {L, 4 * C / p, C}, true, true, true},
           {"blocks.fcb", {L, 4 * C / p}, false, true},
           {"blocks.fcprojw", {L, C, 4 * C / p}, true, true, true},
           {"blocks.fcprojb", {L, C}, false, false},
           {"lnfw", {C_final}, false, false},
           {"lnfb", {C_final}, false, false}}};
}

namespace {

constexpr int kFirstBlockTensor = 2, kLastBlockTensor = 13;  // ln1w … fcprojb

// Elements per block of per-block tensor t on this rank (param_specs' shapes without the L).
int64_t per_layer_count(const GptConfig& config, const Partition& slice, int tensor) {
  const int64_t C = config.channels, Cl = C / slice.size;
  switch (tensor) {
    case 4: return 3 * Cl * C;   // qkvw
    case 5: return 3 * Cl;       // qkvb
    case 6: return C * Cl;       // attprojw
    case 10: return 4 * Cl * C;  // fcw
    case 11: return 4 * Cl;      // fcb
    case 12: return C * 4 * Cl;  // fcprojw
    default: return C;           // LayerNorm weights and biases, attprojb, fcprojb
  }
}

}  // namespace

int64_t global_index(const GptConfig& config, const Partition& slice, int tensor, int64_t local) {
  // A stage's block l is the model's block global_block(l): its index in a stack of all L blocks.
  if (tensor >= kFirstBlockTensor && tensor <= kLastBlockTensor && (slice.first_layer > 0 || slice.chunks() > 1)) {
    const int64_t per = per_layer_count(config, slice, tensor), l = local / per;
    local += (slice.global_block(static_cast<int>(l)) - l) * per;
  }
  if (slice.size == 1) return local;
  const int64_t C = config.channels, p = slice.size, r = slice.rank, Cl = C / p;
  switch (tensor) {
    case 0: return r * (config.padded_vocab / p) * C + local;  // wte: rows
    case 4: {                                                  // qkvw (L, 3C, C): q, k, v rows
      const int64_t c = local % C, row = (local / C) % (3 * Cl), l = local / C / (3 * Cl);
      return (l * 3 * C + row / Cl * C + r * Cl + row % Cl) * C + c;
    }
    case 5: {  // qkvb (L, 3C)
      const int64_t row = local % (3 * Cl), l = local / (3 * Cl);
      return l * 3 * C + row / Cl * C + r * Cl + row % Cl;
    }
    case 6: {  // attprojw (L, C, C): input columns
      const int64_t c = local % Cl, rest = local / Cl;
      return rest * C + r * Cl + c;
    }
    case 10: {  // fcw (L, 4C, C): rows
      const int64_t c = local % C, row = (local / C) % (4 * Cl), l = local / C / (4 * Cl);
      return (l * 4 * C + r * 4 * Cl + row) * C + c;
    }
    case 11: {  // fcb (L, 4C)
      const int64_t row = local % (4 * Cl), l = local / (4 * Cl);
      return l * 4 * C + r * 4 * Cl + row;
    }
    case 12: {  // fcprojw (L, C, 4C): input columns
      const int64_t c = local % (4 * Cl), rest = local / (4 * Cl);
      return rest * 4 * C + r * 4 * Cl + c;
    }
    default: return local;  // replicated
  }
}

int64_t num_parameters(const GptConfig& config, const Partition& slice) {
  int64_t total = 0;
  for (const ParamSpec& spec : param_specs(config, slice)) total += spec.count();
  return total;
}

void extract_slice(const GptConfig& config, const float* whole, float* local, const Partition& slice) {
  const auto global_specs = param_specs(config), local_specs = param_specs(config, slice);
  int64_t global_offset = 0, local_offset = 0;
  for (int t = 0; t < kNumParamTensors; ++t) {
    const int64_t n = local_specs[t].count();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      local[local_offset + i] = whole[global_offset + global_index(config, slice, t, i)];
    global_offset += global_specs[t].count();
    local_offset += n;
  }
}

namespace {

// Views of the tensors `keep` selects, one after another from base; the others null.
template <class Keep>
ParamViews views_of(const GptConfig& config, float* base, const Partition& slice, Keep keep) {
  ParamViews views{};
  float** ordered[] = {&views.wte,     &views.wpe,      &views.ln1w,    &views.ln1b,
                       &views.qkvw,    &views.qkvb,     &views.attprojw, &views.attprojb,
                       &views.ln2w,    &views.ln2b,     &views.fcw,     &views.fcb,
                       &views.fcprojw, &views.fcprojb,  &views.lnfw,    &views.lnfb};
  const auto specs = param_specs(config, slice);
  float* at = base;
  for (int i = 0; i < kNumParamTensors; ++i) {
    if (!keep(specs[i])) continue;
    *ordered[i] = at;
    at += specs[i].count();
  }
  return views;
}

}  // namespace

ParamViews param_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, [](const ParamSpec&) { return true; });
}

ParamViews f32_read_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, [](const ParamSpec& spec) { return !spec.gemm_weight; });
}

int64_t f32_read_count(const GptConfig& config, const Partition& slice) {
  int64_t n = 0;
  for (const ParamSpec& spec : param_specs(config, slice))
    if (!spec.gemm_weight) n += spec.count();
  return n;
}

std::array<int64_t, kNumParamTensors> param_offsets(const GptConfig& config, const Partition& slice) {
  std::array<int64_t, kNumParamTensors> offsets{};
  const auto specs = param_specs(config, slice);
  for (int i = 1; i < kNumParamTensors; ++i) offsets[i] = offsets[i - 1] + specs[i - 1].count();
  return offsets;
}

void init_params(const GptConfig& config, float* params, uint64_t seed, const Partition& slice) {
  const auto specs = param_specs(config, slice);
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
      else at[i] = static_cast<float>(stddev * trident::normal_at(seed, t, global_index(config, slice, t, i)));
    }
    at += n;
  }
}

}  // namespace trident::model
