// GPT-2 as Hugging Face's GPT2LMHeadModel: its config.json and its tensor names and layouts.
//
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
// The head is tied to wte (lm_head.weight is not written; where a file has it, it is not read).
// Reading also takes the names without "transformer." (files saved from GPT2Model, such as
// OpenAI's own gpt2), and skips the attention's causal-mask buffers (h.{l}.attn.bias,
// attn.masked_bias) that older files hold.
// config.json: n_embd, n_layer, n_head, vocab_size, n_positions; the activation gelu_new (the
// tanh approximation, ours), n_inner 4·n_embd, layer_norm_epsilon 1e-5 and tied embeddings are
// what our kernels compute, and a file that says otherwise is refused.
#pragma once

#include <string>

#include "model/config.hpp"
#include "model/hf_files.hpp"
#include "model/params.hpp"

namespace trident::model {

// DIR/config.json as a GPT-2 configuration (padded_vocab by our rule). Throws
// std::runtime_error naming the file and the key when it is not a GPT-2 we compute exactly.
GptConfig read_hf_gpt2_config(const std::string& dir);
Json hf_gpt2_config(const GptConfig& config, DType dtype);

// Writes DIR/config.json and the tensors (in `dtype`) of the whole model `params`
// (num_parameters(config), our order). Returns the tensor files written.
std::vector<std::string> write_hf_gpt2(const std::string& dir, const GptConfig& config, const float* params,
                                       DType dtype, int64_t max_shard_bytes = kHfDefaultShardBytes);

// Every tensor of the whole model in DIR's files checked by name and shape (headers only), and
// no tensor there that GPT2LMHeadModel does not have (but the causal-mask buffers and the tied
// lm_head.weight): std::runtime_error naming the tensor and the file.
void check_hf_gpt2_files(const std::string& dir, const GptConfig& config);

// This rank's slice (num_parameters(config, slice) floats) read from DIR's tensors: of each
// tensor only the rows that hold the slice's elements are read, each tensor checked by name and
// shape first; the directory as a whole is check_hf_gpt2_files', which a job runs before.
void read_hf_gpt2_slice(const std::string& dir, const GptConfig& config, const Partition& slice, float* local);

}  // namespace trident::model
