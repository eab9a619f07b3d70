// Parameter layout and initialisation.
#include "model/params.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/random.hpp"

namespace trident::model {

int padded_vocab_for(int vocab) { return (vocab + 127) / 128 * 128; }

const char* arch_name(Arch arch) { return arch == Arch::llama ? "llama" : "gpt2"; }

int llama_ffn_hidden(int channels, double multiplier, int multiple_of) {
  const int64_t hidden = static_cast<int64_t>(multiplier * (2.0 * 4 * channels / 3));
  return static_cast<int>((hidden + multiple_of - 1) / multiple_of * multiple_of);
}

std::string config_problem(const GptConfig& c) {
  std::string sizes = std::string(arch_name(c.arch)) + ": layers " + std::to_string(c.layers) + ", heads " +
                      std::to_string(c.heads) + ", hidden " + std::to_string(c.channels) + ", vocab " +
                      std::to_string(c.vocab) + " (padded " + std::to_string(c.padded_vocab) + "), seq_len " +
                      std::to_string(c.max_seq_len);
  if (is_llama(c)) sizes += ", kv_heads " + std::to_string(c.kv_heads) + ", ffn_hidden " + std::to_string(c.ffn_hidden);
  if (c.max_seq_len < 1 || c.vocab < 1 || c.layers < 1 || c.heads < 1 || c.channels < 1 || c.padded_vocab < c.vocab ||
      c.channels % c.heads != 0)
    return "inconsistent model shape (" + sizes + "): every size must be at least 1, the padded vocabulary at least "
           "the vocabulary, and hidden a multiple of heads";
  if (is_llama(c) && (c.kv_heads < 1 || c.heads % c.kv_heads != 0 || head_size(c) % 2 != 0 || c.ffn_hidden < 1))
    return "inconsistent model shape (" + sizes + "): llama needs kv_heads dividing heads, an even head size "
           "(rotary pairs) and ffn_hidden at least 1";
  if (is_llama(c) && rope_scaled(c) &&
      !(c.rope_factor >= 1 && c.rope_low_freq_factor > 0 && c.rope_high_freq_factor > c.rope_low_freq_factor &&
        c.rope_original_context >= 1))
    return "rotary scaling (factor " + std::to_string(c.rope_factor) + ", low_freq_factor " +
           std::to_string(c.rope_low_freq_factor) + ", high_freq_factor " + std::to_string(c.rope_high_freq_factor) +
           ", original context " + std::to_string(c.rope_original_context) +
           ") is not Llama 3.1's kind: a factor of at least 1, 0 < low < high and a context of at least 1";
  // num_parameters in long double: the int64 count of a lying shape may overflow.
  const long double C = c.channels, per_block = block_gemm_weights(c) + 13 * C;
  const long double parameters = (2 * static_cast<long double>(c.padded_vocab) + c.max_seq_len + 2) * C +
                                 static_cast<long double>(c.layers) * per_block;
  if (parameters > static_cast<long double>(kMaxParameters))
    return "model shape (" + sizes + ") of " + std::to_string(static_cast<double>(parameters)) +
           " parameters, more than the " + std::to_string(kMaxParameters) + " any run can hold";
  return "";
}

double training_flops_per_token(const GptConfig& c, int seq_len) {
  const double C = c.channels, L = c.layers;
  const double matmul_weights = L * block_gemm_weights(c) + static_cast<double>(c.padded_vocab) * C;
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
  const bool llama = is_llama(config), tied = tied_head(config);
  const int64_t Vp = config.padded_vocab;
  const int64_t V = slice.first_stage || (tied && slice.last_stage) ? Vp : 0, head = !tied && slice.last_stage ? Vp : 0;
  const int64_t T = slice.first_stage && !llama ? config.max_seq_len : 0, L = slice.layers(config);
  const int64_t C = config.channels, p = slice.size, C_final = slice.last_stage ? C : 0;
  const int64_t QKV = qkv_rows_local(config, slice.size), FC = fc_rows(config) / p, H = mlp_hidden(config) / p;
  const int64_t B = llama ? 0 : 1;  // llama has no biases (nor LayerNorm's β)
  return {{{"wte", {V / p, C}, true, true, true},
           {"wpe", {T, C}, true, false},
           {llama ? "blocks.attn_norm" : "blocks.ln1w", {L, C}, false, false},
           {"blocks.ln1b", {L, B * C}, false, false},
           {llama ? "blocks.wqkv" : "blocks.qkvw", {L, QKV, C}, true, true, true},
           {"blocks.qkvb", {L, B * QKV}, false, true},
           {llama ? "blocks.wo" : "blocks.attprojw", {L, C, C / p}, true, true, true},
           {"blocks.attprojb", {L, B * C}, false, false},
           {llama ? "blocks.mlp_norm" : "blocks.ln2w", {L, C}, false, false},
           {"blocks.ln2b", {L, B * C}, false, false},
           {llama ? "blocks.w_gate_up" : "blocks.fcw", {L, FC, C}, true, true, true},
           {"blocks.fcb", {L, B * FC}, false, true},
           {llama ? "blocks.w_down" : "blocks.fcprojw", {L, C, H}, true, true, true},
           {"blocks.fcprojb", {L, B * C}, false, false},
           {llama ? "norm" : "lnfw", {C_final}, false, false},
           {"lnfb", {B * C_final}, false, false},
           {"head", {head / p, C}, true, true, true}}};
}

namespace {

// Elements per block of per-block tensor t on this rank (param_specs' shapes without the L).
int64_t per_layer_count(const GptConfig& config, const Partition& slice, int tensor) {
  const int64_t C = config.channels, p = slice.size, biases = is_llama(config) ? 0 : 1;
  switch (tensor) {
    case kQkvw: return qkv_rows_local(config, slice.size) * C;
    case kQkvb: return biases * qkv_rows_local(config, slice.size);
    case kAttprojw: return C * (C / p);
    case kFcw: return fc_rows(config) / p * C;
    case kFcb: return biases * fc_rows(config) / p;
    case kFcprojw: return C * (mlp_hidden(config) / p);
    case kLn1b: case kAttprojb: case kLn2b: case kFcprojb: return biases * C;
    default: return C;  // the norms' weights
  }
}

// A section of a row-split tensor (q, k, v; gate, up): its rows in the whole tensor, this rank's
// count of them and the first of them within the section.
struct Section {
  int64_t whole, mine, first;
};

// Row `row` of this rank's rows of a tensor split into `sections`: its row in the whole tensor.
int64_t section_row(const Section* sections, int count, int64_t row) {
  int64_t start = 0;
  for (int s = 0; s < count; ++s) {
    if (row < sections[s].mine) return start + sections[s].first + row;
    row -= sections[s].mine, start += sections[s].whole;
  }
  return -1;  // beyond the rows: not reached
}

}  // namespace

int64_t global_index(const GptConfig& config, const Partition& slice, int tensor, int64_t local) {
  // A stage's block l is the model's block global_block(l): its index in a stack of all L blocks.
  if (is_block_tensor(tensor) && (slice.first_layer > 0 || slice.chunks() > 1)) {
    const int64_t per = per_layer_count(config, slice, tensor), l = local / per;
    local += (slice.global_block(static_cast<int>(l)) - l) * per;
  }
  if (slice.size == 1) return local;
  const int64_t C = config.channels, p = slice.size, r = slice.rank, Cl = C / p, kv = kv_channels(config);
  const int64_t QKV = qkv_rows(config), FC = fc_rows(config), H = mlp_hidden(config);
  // k's and v's rows: kv/p of them, or with fewer key/value heads than ranks the one head's.
  const int64_t kv_mine = kv_heads_local(config, slice.size) * int64_t(head_size(config));
  const int64_t kv_first = int64_t(first_kv_head(config, slice.size, slice.rank)) * head_size(config);
  const Section qkv[3] = {{C, Cl, r * Cl}, {kv, kv_mine, kv_first}, {kv, kv_mine, kv_first}};
  const Section fc[2] = {{H, H / p, r * (H / p)}, {H, H / p, r * (H / p)}};  // called per element: no allocation
  const int fc_sections = is_llama(config) ? 2 : 1;
  // Row-split matrices (L, rows, cols) and vectors (L, rows): the row through its sections.
  auto rows_split = [&](const Section* sections, int count, int64_t whole_rows, int64_t cols) {
    int64_t mine_rows = 0;
    for (int s = 0; s < count; ++s) mine_rows += sections[s].mine;
    const int64_t c = local % cols, row = (local / cols) % mine_rows, l = local / cols / mine_rows;
    return (l * whole_rows + section_row(sections, count, row)) * cols + c;
  };
  // Column-split matrices (L, rows, cols): the input columns.
  auto columns_split = [&](int64_t whole_cols) {
    const int64_t c = local % (whole_cols / p), rest = local / (whole_cols / p);
    return rest * whole_cols + r * (whole_cols / p) + c;
  };
  switch (tensor) {
    case kWte:
    case kHead: return r * (config.padded_vocab / p) * C + local;  // rows
    case kQkvw: return rows_split(qkv, 3, QKV, C);                  // q, k, v rows
    case kQkvb: return rows_split(qkv, 3, QKV, 1);
    case kAttprojw: return columns_split(Cl * p);
    case kFcw: return rows_split(fc, fc_sections, FC, C);           // rows (gate's, up's; GPT-2's one section)
    case kFcb: return rows_split(fc, fc_sections, FC, 1);
    case kFcprojw: return columns_split(H);
    default: return local;  // replicated
  }
}

std::vector<std::pair<int64_t, int64_t>> replica_ranges(const GptConfig& config, const Partition& slice, int tensor) {
  const int replicas = kv_replicas(config, slice.size);
  if (tensor != kQkvw || replicas == 1 || slice.rank % replicas == 0) return {};
  const int64_t C = config.channels, rows = qkv_rows_local(config, slice.size), q = C / slice.size;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t l = 0; l < slice.layers(config); ++l) ranges.push_back({(l * rows + q) * C, (l + 1) * rows * C});
  return ranges;
}

int64_t num_parameters(const GptConfig& config, const Partition& slice) {
  int64_t total = 0;
  for (const ParamSpec& spec : param_specs(config, slice)) total += spec.count();
  return total;
}

int64_t block_parameters(const GptConfig& config, int tensor) {
  return one_block_count(config, Partition{0, tensor});
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

// The views' members in tensor order (kWte … kHead).
constexpr float* ParamViews::*kOrdered[] = {
    &ParamViews::wte,      &ParamViews::wpe,      &ParamViews::ln1w, &ParamViews::ln1b, &ParamViews::qkvw,
    &ParamViews::qkvb,     &ParamViews::attprojw, &ParamViews::attprojb, &ParamViews::ln2w, &ParamViews::ln2b,
    &ParamViews::fcw,      &ParamViews::fcb,      &ParamViews::fcprojw,  &ParamViews::fcprojb, &ParamViews::lnfw,
    &ParamViews::lnfb,     &ParamViews::head};
static_assert(std::size(kOrdered) == kNumParamTensors);

int64_t per_layer(const ParamSpec& spec, const GptConfig& config, const Partition& slice) {
  const int L = slice.layers(config);
  return L == 0 ? 0 : spec.count() / L;
}

using PartSize = int64_t (*)(const ParamSpec&, const GptConfig&, const Partition&);

// Where the tensors `keep` selects lie when they are laid out one after another from element 0,
// each `size(spec)` elements (its count by default); -1 for the others. [kNumParamTensors]: the
// elements of them all.
template <class Keep>
std::array<int64_t, kNumParamTensors + 1> offsets_of(const GptConfig& config, const Partition& slice, Keep keep,
                                                     PartSize size = nullptr) {
  std::array<int64_t, kNumParamTensors + 1> offsets{};
  const auto specs = param_specs(config, slice);
  int64_t at = 0;
  for (int i = 0; i < kNumParamTensors; ++i) {
    offsets[i] = keep(i, specs[i]) ? at : -1;
    if (offsets[i] >= 0) at += size ? size(specs[i], config, slice) : specs[i].count();
  }
  offsets[kNumParamTensors] = at;
  return offsets;
}

// Views of the tensors `keep` selects, laid out as offsets_of says from base; the others null.
template <class Keep>
ParamViews views_of(const GptConfig& config, float* base, const Partition& slice, Keep keep, PartSize size = nullptr) {
  ParamViews views{};
  const auto offsets = offsets_of(config, slice, keep, size);
  for (int i = 0; i < kNumParamTensors; ++i)
    if (offsets[i] >= 0) views.*kOrdered[i] = base + offsets[i];
  return views;
}

}  // namespace

float* tensor_view(const ParamViews& views, int t) { return views.*kOrdered[t]; }
float*& tensor_view(ParamViews& views, int t) { return views.*kOrdered[t]; }

ParamViews param_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, [](int, const ParamSpec&) { return true; });
}

ParamViews f32_read_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, [](int, const ParamSpec& spec) { return !spec.gemm_weight; });
}

namespace {

bool outside(int t, const ParamSpec&) { return !is_block_tensor(t); }
bool in_block(int t, const ParamSpec&) { return is_block_tensor(t); }
bool outside_f32(int t, const ParamSpec& spec) { return !is_block_tensor(t) && !spec.gemm_weight; }
bool in_block_f32(int t, const ParamSpec& spec) { return is_block_tensor(t) && !spec.gemm_weight; }

}  // namespace

ParamViews outside_block_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, outside);
}

int64_t outside_block_count(const GptConfig& config, const Partition& slice) {
  return offsets_of(config, slice, outside)[kNumParamTensors];
}

ParamViews one_block_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, in_block, per_layer);
}

int64_t one_block_count(const GptConfig& config, const Partition& slice) {
  return offsets_of(config, slice, in_block, per_layer)[kNumParamTensors];
}

namespace {

// An offsets_of layout's tensor offsets, without its total.
std::array<int64_t, kNumParamTensors> tensor_offsets(const std::array<int64_t, kNumParamTensors + 1>& layout) {
  std::array<int64_t, kNumParamTensors> offsets{};
  std::copy(layout.begin(), layout.begin() + kNumParamTensors, offsets.begin());
  return offsets;
}

}  // namespace

std::array<int64_t, kNumParamTensors> outside_block_offsets(const GptConfig& config, const Partition& slice) {
  return tensor_offsets(offsets_of(config, slice, outside));
}

std::array<int64_t, kNumParamTensors> one_block_offsets(const GptConfig& config, const Partition& slice) {
  return tensor_offsets(offsets_of(config, slice, in_block, per_layer));
}

ParamViews outside_f32_read_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, outside_f32);
}

int64_t outside_f32_read_count(const GptConfig& config, const Partition& slice) {
  return offsets_of(config, slice, outside_f32)[kNumParamTensors];
}

ParamViews one_block_f32_read_views(const GptConfig& config, float* base, const Partition& slice) {
  return views_of(config, base, slice, in_block_f32, per_layer);
}

int64_t one_block_f32_read_count(const GptConfig& config, const Partition& slice) {
  return offsets_of(config, slice, in_block_f32, per_layer)[kNumParamTensors];
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
  init_param_ranges(config, {{0, num_parameters(config, slice)}}, params, seed, slice);
}

void init_param_ranges(const GptConfig& config, const FlatRanges& ranges, float* out, uint64_t seed,
                       const Partition& slice) {
  const auto specs = param_specs(config, slice);
  const auto offsets = param_offsets(config, slice);
  const double residual_std = 0.02 / std::sqrt(2.0 * config.layers);
  float* at = out;
  for (const FlatRange& range : ranges)
    for (int t = 0; t < kNumParamTensors; ++t) {
      const int64_t lo = std::max(range.begin, offsets[t]), hi = std::min(range.end, offsets[t] + specs[t].count());
      if (lo >= hi) continue;
      const bool is_ln_weight = t == kLn1w || t == kLn2w || t == kLnfw;  // LayerNorm's or RMSNorm's weights
      const bool is_bias = t == kLn1b || t == kQkvb || t == kAttprojb || t == kLn2b || t == kFcb || t == kFcprojb || t == kLnfb;
      const bool residual = t == kAttprojw || t == kFcprojw;
      const double stddev = residual ? residual_std : 0.02;
      const int64_t first = lo - offsets[t];  // the range's first element of the tensor
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < hi - lo; ++i) {
        if (is_ln_weight) at[i] = 1.0f;
        else if (is_bias) at[i] = 0.0f;
        else at[i] = static_cast<float>(stddev * trident::normal_at(seed, t, global_index(config, slice, t, first + i)));
      }
      at += hi - lo;
    }
}

}  // namespace trident::model
