// GPT2LMHeadModel's names and layouts, both ways.
#include "model/hf_gpt2.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

namespace trident::model {
namespace {

// Our tensor t's name in GPT2LMHeadModel (after "transformer." and, per block, "h.{l}."), and
// whether its matrix is stored transposed there (Conv1D keeps in × out, we keep out × in).
struct HfName {
  const char* name;
  bool per_block, transposed;
};
constexpr int kGpt2Tensors = kHead;  // GPT-2's 16 (its head is wte)
constexpr HfName kNames[kGpt2Tensors] = {
    {"wte.weight", false, false},        {"wpe.weight", false, false},
    {"ln_1.weight", true, false},        {"ln_1.bias", true, false},
    {"attn.c_attn.weight", true, true},  {"attn.c_attn.bias", true, false},
    {"attn.c_proj.weight", true, true},  {"attn.c_proj.bias", true, false},
    {"ln_2.weight", true, false},        {"ln_2.bias", true, false},
    {"mlp.c_fc.weight", true, true},     {"mlp.c_fc.bias", true, false},
    {"mlp.c_proj.weight", true, true},   {"mlp.c_proj.bias", true, false},
    {"ln_f.weight", false, false},       {"ln_f.bias", false, false},
};
constexpr const char* kPrefix = "transformer.";

std::string hf_name(const std::string& prefix, int t, int layer) {
  return prefix + (kNames[t].per_block ? "h." + std::to_string(layer) + "." : "") + kNames[t].name;
}

// Tensor t of the whole model, one block's part (or all of it): rows × cols as we lay it out.
struct Matrix {
  int64_t rows, cols;
  int64_t count() const { return rows * cols; }
};
Matrix our_matrix(const GptConfig& config, int t) {
  const ParamSpec spec = param_specs(config)[t];
  const size_t first = kNames[t].per_block ? 1 : 0;  // past the layer dimension
  if (spec.shape.size() == first + 1) return {1, spec.shape[first]};
  return {spec.shape[first], spec.shape[first + 1]};
}

// Its shape in the file: wte has the V valid rows only; Conv1D's matrices are transposed.
std::vector<int64_t> hf_shape(const GptConfig& config, int t) {
  const Matrix m = our_matrix(config, t);
  if (t == kWte) return {config.vocab, m.cols};
  if (kNames[t].transposed) return {m.cols, m.rows};
  if (m.rows == 1) return {m.cols};
  return {m.rows, m.cols};
}

// Element w of our matrix (row-major) in the file's tensor; -1: a padded row of wte, not there.
int64_t hf_index(const GptConfig& config, int t, const Matrix& m, int64_t w) {
  if (t == kWte && w >= int64_t(config.vocab) * m.cols) return -1;
  if (!kNames[t].transposed) return w;
  return (w % m.cols) * m.rows + w / m.cols;
}

const JsonLookup& required(const JsonLookup& config, const std::string& file, const char* key) {
  if (!config.contains(key)) throw std::runtime_error(file + ": no \"" + key + "\"");
  return config[key];
}

int positive(const JsonLookup& config, const std::string& file, const char* key) {
  const JsonLookup& v = required(config, file, key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > uint64_t(std::numeric_limits<int>::max()))
    throw std::runtime_error(file + ": \"" + key + "\" is " + v.dump() + ", not a whole number >= 1");
  return v.get<int>();
}

// A key our kernels fix: absent (transformers' default, the same), or equal to what we compute.
void fixed(const JsonLookup& config, const std::string& file, const char* key, const JsonLookup& ours, const std::string& why) {
  if (!config.contains(key) || config[key] == ours) return;
  if (config[key].is_number() && ours.is_number() &&
      std::fabs(config[key].get<double>() - ours.get<double>()) <= 1e-9 * std::fabs(ours.get<double>()))
    return;
  throw std::runtime_error(file + ": \"" + key + "\" is " + config[key].dump() + "; Trident's GPT-2 computes " +
                           ours.dump() + " (" + why + ")");
}

const char* torch_dtype(DType dtype) {
  return dtype == DType::bf16 ? "bfloat16" : dtype == DType::fp16 ? "float16" : "float32";
}

// The names' prefix the files use: "transformer." (GPT2LMHeadModel) or none (GPT2Model).
std::string prefix_of(const HfTensors& files) {
  return files.has(std::string(kPrefix) + kNames[kWte].name) ? kPrefix : "";
}

// Every tensor of the whole model checked by name and shape, and nothing else there but the
// buffers and the tied head.
void check_every_tensor(const HfTensors& files, const GptConfig& config) {
  const std::string prefix = prefix_of(files);
  std::set<std::string> known;
  for (int t = 0; t < kGpt2Tensors; ++t)
    for (int l = 0; l < (kNames[t].per_block ? config.layers : 1); ++l) {
      known.insert(hf_name(prefix, t, l));
      files.get(hf_name(prefix, t, l), hf_shape(config, t));
    }
  for (const std::string& name : files.names()) {
    const bool buffer = name.size() > 9 && (name.compare(name.size() - 9, 9, "attn.bias") == 0 ||
                                            name.find("attn.masked_bias") != std::string::npos);
    if (!known.count(name) && !buffer && name != "lm_head.weight")
      throw std::runtime_error(files.dir() + ": tensor '" + name + "' is not one of GPT2LMHeadModel's for " +
                               std::to_string(config.layers) + " blocks");
  }
}

}  // namespace

GptConfig read_hf_gpt2_config(const std::string& dir) {
  const JsonLookup j = read_hf_config(dir);
  const std::string file = dir + "/" + kHfConfig;
  const JsonLookup& type = required(j, file, "model_type");
  if (type != "gpt2")
    throw std::runtime_error(file + ": model_type " + type.dump() + " is not one Trident reads (gpt2)");
  GptConfig c;
  c.channels = positive(j, file, "n_embd");
  c.layers = positive(j, file, "n_layer");
  c.heads = positive(j, file, "n_head");
  c.vocab = positive(j, file, "vocab_size");
  c.max_seq_len = positive(j, file, "n_positions");
  c.padded_vocab = padded_vocab_for(c.vocab);
  if (j.contains("n_inner") && !j["n_inner"].is_null()) fixed(j, file, "n_inner", 4 * c.channels, "the MLP is 4·n_embd wide");
  fixed(j, file, "activation_function", "gelu_new", "the tanh approximation of GELU");
  fixed(j, file, "layer_norm_epsilon", 1e-5, "the LayerNorm's epsilon");
  fixed(j, file, "tie_word_embeddings", true, "the head is the token embedding");
  fixed(j, file, "scale_attn_weights", true, "scores divided by the square root of the head size");
  fixed(j, file, "scale_attn_by_inverse_layer_idx", false, "no per-layer score scale");
  const std::string problem = config_problem(c);
  if (!problem.empty()) throw std::runtime_error(file + ": " + problem);
  return c;
}

Json hf_gpt2_config(const GptConfig& c, DType dtype) {
  Json j = {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", c.vocab},
            {"n_positions", c.max_seq_len},
            {"n_ctx", c.max_seq_len},
            {"n_embd", c.channels},
            {"n_layer", c.layers},
            {"n_head", c.heads},
            {"n_inner", nullptr},
            {"activation_function", "gelu_new"},
            {"layer_norm_epsilon", 1e-5},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"initializer_range", 0.02},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", true},
            {"use_cache", true},
            {"torch_dtype", torch_dtype(dtype)}};
  if (c.vocab == 50257) j["bos_token_id"] = j["eos_token_id"] = 50256;  // GPT-2's <|endoftext|>
  return j;
}

std::vector<std::string> write_hf_gpt2(const std::string& dir, const GptConfig& config, const float* params,
                                       DType dtype, int64_t max_shard_bytes) {
  const auto offsets = param_offsets(config);
  std::vector<TensorToWrite> tensors;
  auto add = [&](int t, int layer) {
    const Matrix m = our_matrix(config, t);
    const float* ours = params + offsets[t] + (kNames[t].per_block ? layer * m.count() : 0);
    tensors.push_back({hf_name(kPrefix, t, layer), hf_shape(config, t), [&config, t, m, ours](float* out) {
                         for (int64_t w = 0; w < m.count(); ++w)
                           if (const int64_t h = hf_index(config, t, m, w); h >= 0) out[h] = ours[w];
                       }});
  };
  add(kWte, 0), add(kWpe, 0);  // save_pretrained's order: the embeddings, the blocks, the final LayerNorm
  for (int l = 0; l < config.layers; ++l)
    for (int t = kLn1w; t <= kFcprojb; ++t) add(t, l);
  add(kLnfw, 0), add(kLnfb, 0);
  std::vector<std::string> files = write_hf_tensors(dir, tensors, dtype, max_shard_bytes);
  write_hf_config(dir, hf_gpt2_config(config, dtype));  // last: a directory with config.json is complete
  return files;
}

void check_hf_gpt2_files(const std::string& dir, const GptConfig& config) { check_every_tensor(HfTensors(dir), config); }

// Every rank checked the whole directory in check_hf_gpt2_files (model_config); here only the
// tensors this rank reads are checked again, by name and shape, as it reads them.
void read_hf_gpt2_slice(const std::string& dir, const GptConfig& config, const Partition& slice, float* local) {
  const HfTensors files(dir);
  const std::string prefix = prefix_of(files);
  const auto specs = param_specs(config, slice);
  std::vector<float> block;
  int64_t at = 0;
  for (int t = 0; t < kGpt2Tensors; ++t) {
    const int64_t n = specs[t].count();
    if (n == 0) continue;
    const Matrix m = our_matrix(config, t);
    const int64_t parts = kNames[t].per_block ? slice.layers(config) : 1, per = n / parts;
    for (int64_t part = 0; part < parts; ++part) {
      const int64_t first = part * per;  // this part's local elements: [first, first + per)
      const int64_t layer = kNames[t].per_block ? global_index(config, slice, t, first) / m.count() : 0;
      const std::string name = hf_name(prefix, t, static_cast<int>(layer));
      files.get(name, hf_shape(config, t));
      auto index_of = [&](int64_t i) {
        return hf_index(config, t, m, global_index(config, slice, t, first + i) - layer * m.count());
      };
      int64_t low = std::numeric_limits<int64_t>::max(), high = -1;
#pragma omp parallel for reduction(min : low) reduction(max : high)
      for (int64_t i = 0; i < per; ++i)
        if (const int64_t h = index_of(i); h >= 0) low = std::min(low, h), high = std::max(high, h);
      if (high >= 0) {  // the rows of the file's tensor that hold this part, read at once
        block.resize(static_cast<size_t>(high - low + 1));
        files.read(name, low, high - low + 1, block.data());
      }
      float* out = local + at + first;
#pragma omp parallel for
      for (int64_t i = 0; i < per; ++i) {
        const int64_t h = index_of(i);
        out[i] = h >= 0 ? block[static_cast<size_t>(h - low)] : 0.0f;
      }
    }
    at += n;
  }
}

}  // namespace trident::model
