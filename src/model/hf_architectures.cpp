// GPT2LMHeadModel's and LlamaForCausalLM's names, layouts and config.json.
#include "model/hf_architectures.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "model/params.hpp"

namespace trident::model {
namespace {

// Our tensor t of the whole model as a matrix: one block's part for per-block tensors.
struct Matrix {
  int64_t rows, cols;
};
Matrix our_matrix(const GptConfig& config, int t) {
  const ParamSpec spec = param_specs(config)[t];
  const size_t first = is_block_tensor(t) ? 1 : 0;  // past the layer dimension
  if (spec.shape.size() == first + 1) return {1, spec.shape[first]};
  return {spec.shape[first], spec.shape[first + 1]};
}

// File tensor `name`: rows [first_row, first_row + rows) of ours (rows < 0: all of them).
HfTensor piece(const GptConfig& config, const std::string& name, int t, int layer, int64_t first_row = 0,
               int64_t rows = -1, bool transposed = false) {
  const Matrix m = our_matrix(config, t);
  HfTensor h;
  h.name = name, h.tensor = t, h.layer = layer, h.per_block = is_block_tensor(t);
  h.first_row = first_row, h.rows = rows < 0 ? m.rows : rows, h.cols = m.cols;
  h.transposed = transposed, h.vector = m.rows == 1;
  return h;
}

const char* torch_dtype(DType dtype) {
  return dtype == DType::bf16 ? "bfloat16" : dtype == DType::fp16 ? "float16" : "float32";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

HfArchitecture gpt2_tables(const GptConfig& config, const std::string& prefix) {
  HfArchitecture a{"GPT2LMHeadModel", {}, [](const std::string& name) {
                     return ends_with(name, "attn.bias") || name.find("attn.masked_bias") != std::string::npos ||
                            name == "lm_head.weight";
                   }};
  auto& out = a.tensors;
  out.push_back(piece(config, prefix + "wte.weight", kWte, 0, 0, config.vocab));
  out.push_back(piece(config, prefix + "wpe.weight", kWpe, 0));
  struct Name {
    const char* name;
    int tensor;
    bool transposed;
  };
  constexpr Name kBlock[] = {{"ln_1.weight", kLn1w, false},       {"ln_1.bias", kLn1b, false},
                             {"attn.c_attn.weight", kQkvw, true}, {"attn.c_attn.bias", kQkvb, false},
                             {"attn.c_proj.weight", kAttprojw, true}, {"attn.c_proj.bias", kAttprojb, false},
                             {"ln_2.weight", kLn2w, false},       {"ln_2.bias", kLn2b, false},
                             {"mlp.c_fc.weight", kFcw, true},     {"mlp.c_fc.bias", kFcb, false},
                             {"mlp.c_proj.weight", kFcprojw, true}, {"mlp.c_proj.bias", kFcprojb, false}};
  for (int l = 0; l < config.layers; ++l)
    for (const Name& n : kBlock)
      out.push_back(piece(config, prefix + "h." + std::to_string(l) + "." + n.name, n.tensor, l, 0, -1, n.transposed));
  out.push_back(piece(config, prefix + "ln_f.weight", kLnfw, 0));
  out.push_back(piece(config, prefix + "ln_f.bias", kLnfb, 0));
  return a;
}

HfArchitecture llama_tables(const GptConfig& config) {
  const bool tied = tied_head(config);
  HfArchitecture a{"LlamaForCausalLM", {}, [tied](const std::string& name) {
                     return ends_with(name, "rotary_emb.inv_freq") || (tied && name == "lm_head.weight");
                   }};
  auto& out = a.tensors;
  const int64_t C = config.channels, kv = kv_channels(config), F = mlp_hidden(config);
  out.push_back(piece(config, "model.embed_tokens.weight", kWte, 0, 0, config.vocab));
  for (int l = 0; l < config.layers; ++l) {
    const std::string at = "model.layers." + std::to_string(l) + ".";
    out.push_back(piece(config, at + "self_attn.q_proj.weight", kQkvw, l, 0, C));
    out.push_back(piece(config, at + "self_attn.k_proj.weight", kQkvw, l, C, kv));
    out.push_back(piece(config, at + "self_attn.v_proj.weight", kQkvw, l, C + kv, kv));
    out.push_back(piece(config, at + "self_attn.o_proj.weight", kAttprojw, l));
    out.push_back(piece(config, at + "mlp.gate_proj.weight", kFcw, l, 0, F));
    out.push_back(piece(config, at + "mlp.up_proj.weight", kFcw, l, F, F));
    out.push_back(piece(config, at + "mlp.down_proj.weight", kFcprojw, l));
    out.push_back(piece(config, at + "input_layernorm.weight", kLn1w, l));
    out.push_back(piece(config, at + "post_attention_layernorm.weight", kLn2w, l));
  }
  out.push_back(piece(config, "model.norm.weight", kLnfw, 0));
  if (!tied) out.push_back(piece(config, "lm_head.weight", kHead, 0, 0, config.vocab));
  return a;
}

// config.json's keys, each read or refused with the file and the key named.
class ConfigKeys {
 public:
  ConfigKeys(const JsonLookup& j, const std::string& file) : j_(j), file_(file) {}
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const JsonLookup& required(const char* key) const {
    if (!has(key)) throw std::runtime_error(file_ + ": no \"" + key + "\"");
    return j_[key];
  }
  int positive(const char* key) const { return positive_in(required(key), key); }
  int positive_or(const char* key, int otherwise) const { return has(key) ? positive(key) : otherwise; }
  double real_or(const char* key, double otherwise) const {
    if (!has(key)) return otherwise;
    if (!j_[key].is_number() || !(j_[key].get<double>() > 0) || !std::isfinite(j_[key].get<double>()))
      throw std::runtime_error(file_ + ": \"" + key + "\" is " + j_[key].dump() + ", not a number above 0");
    return j_[key].get<double>();
  }
  // A key our kernels fix: absent (transformers' default, the same), or equal to what we compute.
  void fixed(const char* key, const JsonLookup& ours, const std::string& why) const {
    if (!has(key) || j_[key] == ours) return;
    if (j_[key].is_number() && ours.is_number() &&
        std::fabs(j_[key].get<double>() - ours.get<double>()) <= 1e-9 * std::fabs(ours.get<double>()))
      return;
    throw std::runtime_error(file_ + ": \"" + key + "\" is " + j_[key].dump() + "; Trident computes " + ours.dump() +
                             " (" + why + ")");
  }
  int positive_in(const JsonLookup& v, const std::string& key) const {
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > uint64_t(std::numeric_limits<int>::max()))
      throw std::runtime_error(file_ + ": \"" + key + "\" is " + v.dump() + ", not a whole number >= 1");
    return v.get<int>();
  }
  const JsonLookup& json() const { return j_; }
  const std::string& file() const { return file_; }

 private:
  const JsonLookup& j_;
  const std::string& file_;
};

GptConfig gpt2_config(const ConfigKeys& k) {
  GptConfig c;
  c.channels = k.positive("n_embd");
  c.layers = k.positive("n_layer");
  c.heads = k.positive("n_head");
  c.vocab = k.positive("vocab_size");
  c.max_seq_len = k.positive("n_positions");
  if (k.has("n_inner")) k.fixed("n_inner", 4 * c.channels, "the MLP is 4·n_embd wide");
  k.fixed("activation_function", "gelu_new", "the tanh approximation of GELU");
  k.fixed("layer_norm_epsilon", 1e-5, "the LayerNorm's epsilon");
  k.fixed("tie_word_embeddings", true, "GPT-2's head is the token embedding");
  k.fixed("scale_attn_weights", true, "scores divided by the square root of the head size");
  k.fixed("scale_attn_by_inverse_layer_idx", false, "no per-layer score scale");
  return c;
}

// rope_scaling: null, or Llama 3.1's {"rope_type": "llama3", "factor", "low_freq_factor",
// "high_freq_factor", "original_max_position_embeddings"}.
void read_rope_scaling(const ConfigKeys& k, GptConfig& c) {
  if (!k.has("rope_scaling")) return;
  const JsonLookup& s = k.json()["rope_scaling"];
  const std::string where = "\"rope_scaling\"";
  if (!s.is_object()) throw std::runtime_error(k.file() + ": " + where + " is " + s.dump() + ", not null or an object");
  const char* type_key = s.contains("rope_type") ? "rope_type" : "type";
  if (!s.contains(type_key) || s[type_key] != "llama3")
    throw std::runtime_error(k.file() + ": " + where + " is " + s.dump() +
                             "; Trident computes Llama 3.1's kind (rope_type \"llama3\") or none");
  auto number = [&](const char* key) {
    if (!s.contains(key) || !s[key].is_number() || !std::isfinite(s[key].get<double>()))
      throw std::runtime_error(k.file() + ": " + where + " has no number \"" + key + "\"");
    return static_cast<float>(s[key].get<double>());
  };
  c.rope_factor = number("factor");
  c.rope_low_freq_factor = number("low_freq_factor");
  c.rope_high_freq_factor = number("high_freq_factor");
  c.rope_original_context = number("original_max_position_embeddings");  // a factor of 1 is no scaling
}

GptConfig llama_config(const ConfigKeys& k) {
  GptConfig c;
  c.arch = Arch::llama;
  c.channels = k.positive("hidden_size");
  c.layers = k.positive("num_hidden_layers");
  c.heads = k.positive("num_attention_heads");
  c.kv_heads = k.positive_or("num_key_value_heads", c.heads);
  c.ffn_hidden = k.positive("intermediate_size");
  c.vocab = k.positive("vocab_size");
  c.max_seq_len = k.positive("max_position_embeddings");
  c.norm_eps = static_cast<float>(k.real_or("rms_norm_eps", 1e-6));  // LlamaConfig's defaults
  c.rope_theta = static_cast<float>(k.real_or("rope_theta", 10000.0));
  c.tie_embeddings = k.has("tie_word_embeddings") && k.json()["tie_word_embeddings"] == true;
  if (k.has("tie_word_embeddings") && !k.json()["tie_word_embeddings"].is_boolean())
    throw std::runtime_error(k.file() + ": \"tie_word_embeddings\" is " + k.json()["tie_word_embeddings"].dump() +
                             ", not true or false");
  k.fixed("hidden_act", "silu", "SwiGLU's gate is SiLU");
  k.fixed("attention_bias", false, "no biases");
  k.fixed("mlp_bias", false, "no biases");
  if (k.has("head_dim") && c.channels % c.heads == 0)
    k.fixed("head_dim", c.channels / c.heads, "the head size is hidden_size / num_attention_heads");
  read_rope_scaling(k, c);
  return c;
}

// A float of ours as the decimal it was given as (1e-05, not 9.999999747378752e-06).
double shortest(float value) {
  char text[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(value));
    if (std::stof(text) == value) break;
  }
  return std::stod(text);
}

Json gpt2_json(const GptConfig& c, DType dtype) {
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

Json llama_json(const GptConfig& c, DType dtype) {
  Json scaling = nullptr;
  if (rope_scaled(c))
    scaling = {{"rope_type", "llama3"},
               {"factor", shortest(c.rope_factor)},
               {"low_freq_factor", shortest(c.rope_low_freq_factor)},
               {"high_freq_factor", shortest(c.rope_high_freq_factor)},
               {"original_max_position_embeddings", static_cast<int64_t>(c.rope_original_context)}};
  Json j = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"vocab_size", c.vocab},
            {"hidden_size", c.channels},
            {"intermediate_size", c.ffn_hidden},
            {"num_hidden_layers", c.layers},
            {"num_attention_heads", c.heads},
            {"num_key_value_heads", kv_heads(c)},
            {"head_dim", head_size(c)},
            {"hidden_act", "silu"},
            {"max_position_embeddings", c.max_seq_len},
            {"rms_norm_eps", shortest(c.norm_eps)},
            {"rope_theta", shortest(c.rope_theta)},
            {"rope_scaling", scaling},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"mlp_bias", false},
            {"pretraining_tp", 1},
            {"initializer_range", 0.02},
            {"tie_word_embeddings", tied_head(c)},
            {"use_cache", true},
            {"torch_dtype", torch_dtype(dtype)}};
  if (c.vocab == 128256) j["bos_token_id"] = 128000, j["eos_token_id"] = 128001;  // Llama 3's
  return j;
}

}  // namespace

std::vector<int64_t> HfTensor::shape() const {
  if (vector) return {cols};
  if (transposed) return {cols, rows};
  return {rows, cols};
}

HfArchitecture hf_architecture(const GptConfig& config, const std::string& prefix) {
  return is_llama(config) ? llama_tables(config) : gpt2_tables(config, prefix);
}

std::string hf_gpt2_prefix(const std::function<bool(const std::string&)>& has) {
  return has("transformer.wte.weight") ? "transformer." : "";
}

GptConfig hf_config_from_json(const JsonLookup& j, const std::string& file) {
  const ConfigKeys keys(j, file);
  const JsonLookup& type = keys.required("model_type");
  GptConfig c;
  if (type == "gpt2") c = gpt2_config(keys);
  else if (type == "llama") c = llama_config(keys);
  else throw std::runtime_error(file + ": model_type " + type.dump() + " is not one Trident reads (gpt2, llama)");
  c.padded_vocab = padded_vocab_for(c.vocab);
  const std::string problem = config_problem(c);
  if (!problem.empty()) throw std::runtime_error(file + ": " + problem);
  return c;
}

Json hf_config_json(const GptConfig& config, DType dtype) {
  return is_llama(config) ? llama_json(config, dtype) : gpt2_json(config, dtype);
}

}  // namespace trident::model
