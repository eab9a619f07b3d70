// A model as a Hugging Face model directory, both ways: GPT2LMHeadModel for gpt2,
// LlamaForCausalLM for llama (the names, layouts and config.json of each:
// model/hf_architectures.hpp; the directory's files: model/hf_files.hpp).
#pragma once

#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/hf_files.hpp"
#include "model/params.hpp"

namespace trident::model {

// DIR/config.json as our configuration (padded_vocab by our rule). Throws std::runtime_error
// naming the file and the key when it is not a model we compute exactly.
GptConfig read_hf_model_config(const std::string& dir);

// The class the files are for: "GPT2LMHeadModel" or "LlamaForCausalLM".
const char* hf_class_name(const GptConfig& config);

// Writes DIR/config.json and the tensors (in `dtype`) of the whole model `params`
// (num_parameters(config), our order). Returns the tensor files written.
std::vector<std::string> write_hf_model(const std::string& dir, const GptConfig& config, const float* params,
                                        DType dtype, int64_t max_shard_bytes = kHfDefaultShardBytes);

// Every tensor of the whole model in DIR's files checked by name and shape (headers only), and
// no tensor there that the class does not have (but buffers and a tied lm_head.weight):
// std::runtime_error naming the tensor and the file.
void check_hf_model_files(const std::string& dir, const GptConfig& config);

// This rank's slice (num_parameters(config, slice) floats) read from DIR's tensors: of each
// file tensor only the rows that hold the slice's elements are read, each checked by name and
// shape first; the directory as a whole is check_hf_model_files', which a job runs before.
void read_hf_model_slice(const std::string& dir, const GptConfig& config, const Partition& slice, float* local);

}  // namespace trident::model
