// The two architectures as Hugging Face names them: their config.json and how each of their
// tensors is a block of rows of one of ours (model/params.hpp). What reads and writes the files
// from these tables is model/hf_model.hpp's.
//
// GPT2LMHeadModel ("transformer." before each name; files saved from GPT2Model have none):
//   ours (model/params.hpp)     Hugging Face                         layout there
//   wte (Vp, C)                 transformer.wte.weight (V, C)        the first V rows (Vp - V pad rows are zero)
//   wpe (maxT, C)               transformer.wpe.weight (maxT, C)
//   ln1w, ln1b (L, C)           transformer.h.{l}.ln_1.weight/bias
//   qkvw (L, 3C, C)             transformer.h.{l}.attn.c_attn.weight (C, 3C)   transposed (Conv1D: in × out)
//   qkvb (L, 3C)                transformer.h.{l}.attn.c_attn.bias
//   attprojw (L, C, C)          transformer.h.{l}.attn.c_proj.weight (C, C)    transposed
//   attprojb, ln2w, ln2b        ….attn.c_proj.bias, ….ln_2.weight/bias
//   fcw (L, 4C, C)              transformer.h.{l}.mlp.c_fc.weight (C, 4C)      transposed
//   fcb (L, 4C)                 transformer.h.{l}.mlp.c_fc.bias
//   fcprojw (L, C, 4C)          transformer.h.{l}.mlp.c_proj.weight (4C, C)    transposed
//   fcprojb, lnfw, lnfb         ….mlp.c_proj.bias, transformer.ln_f.weight/bias
// The head is tied to wte (lm_head.weight is not written; where a file has it, it is not read);
// the attention's causal-mask buffers (h.{l}.attn.bias, attn.masked_bias) of older files are
// skipped. config.json: n_embd, n_layer, n_head, vocab_size, n_positions; gelu_new (the tanh
// approximation, ours), n_inner 4·n_embd, layer_norm_epsilon 1e-5 and tied embeddings are what
// our kernels compute, and a file that says otherwise is refused.
//
// LlamaForCausalLM ("model." before each name but lm_head's); every matrix (out, in) as ours:
//   wte (Vp, C)                 model.embed_tokens.weight (V, C)     the first V rows
//   attn_norm (L, C)            model.layers.{l}.input_layernorm.weight
//   wqkv (L, C + 2·kv, C)       model.layers.{l}.self_attn.q_proj.weight (C, C)   rows [0, C)
//                               ….self_attn.k_proj.weight (kv, C)                 rows [C, C + kv)
//                               ….self_attn.v_proj.weight (kv, C)                 rows [C + kv, C + 2·kv)
//   wo (L, C, C)                ….self_attn.o_proj.weight
//   mlp_norm (L, C)             ….post_attention_layernorm.weight
//   w_gate_up (L, 2F, C)        ….mlp.gate_proj.weight (F, C) rows [0, F), ….mlp.up_proj.weight rows [F, 2F)
//   w_down (L, C, F)            ….mlp.down_proj.weight
//   norm (C)                    model.norm.weight
//   head (Vp, C)                lm_head.weight (V, C)                untied; tied: not written
// (kv = kv_heads · head size.) Our rotary positions are transformers' rotate_half on q and k as
// they are stored there, so no row is permuted. config.json: hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
// max_position_embeddings, rms_norm_eps, rope_theta, rope_scaling (null or rope_type llama3),
// tie_word_embeddings; hidden_act silu, no attention or MLP biases and head_dim = hidden/heads
// are what we compute, and a file that says otherwise is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "model/config.hpp"
#include "tensor/device.hpp"

namespace trident::model {

// One tensor of the files as rows [first_row, first_row + rows) of our tensor `tensor`'s (rows ×
// cols) matrix — of block `layer`'s part of it for a per-block tensor — stored as (rows, cols),
// transposed as (cols, rows), or as a vector (cols) where our matrix is one row.
struct HfTensor {
  std::string name;
  int tensor = 0, layer = 0;
  bool per_block = false;
  int64_t first_row = 0, rows = 0, cols = 0;
  bool transposed = false, vector = false;
  std::vector<int64_t> shape() const;
  // Index in the file's tensor of our matrix's row r (first_row <= r < first_row + rows), column c.
  int64_t index(int64_t r, int64_t c) const {
    return transposed ? c * rows + (r - first_row) : (r - first_row) * cols + c;
  }
};

struct HfArchitecture {
  const char* class_name;          // "GPT2LMHeadModel", "LlamaForCausalLM"
  std::vector<HfTensor> tensors;   // the whole model's, in save_pretrained's order
  // A name the files may hold that is none of ours and is skipped (buffers, a tied head).
  std::function<bool(const std::string&)> skipped;
};

// The tables for `config`; for GPT-2 with `prefix` "transformer." (what we write) or "".
HfArchitecture hf_architecture(const GptConfig& config, const std::string& prefix);
// The prefix of GPT-2 names the files use (has(name) says whether they hold a tensor).
std::string hf_gpt2_prefix(const std::function<bool(const std::string&)>& has);

// DIR's config.json (parsed, `file` its path) as our configuration, by model_type: gpt2 or
// llama. Throws std::runtime_error naming the file and the key when it is not a model we compute
// exactly.
GptConfig hf_config_from_json(const JsonLookup& config, const std::string& file);
Json hf_config_json(const GptConfig& config, DType dtype);

}  // namespace trident::model
