// llm.c's GPT-2 model file (train_gpt2.c): a header of 256 int32 — magic 20240326, version 3
// (fp32), max_seq_len, vocab V, layers, heads, channels, padded vocab Vp — then every parameter
// in fp32, in the order of model/params.hpp. Read and written exactly, so models move between
// llm.c, Trident and anything else that reads the format.
#pragma once

#include <string>

#include "model/config.hpp"

namespace trident::model {

constexpr int kLlmcModelMagic = 20240326;
constexpr int kLlmcModelVersionFp32 = 3;

// The configuration in the header. Throws std::runtime_error naming the file and the problem
// (missing, wrong magic, unsupported version, sizes that do not match the file length).
GptConfig read_llmc_header(const std::string& path);
// Reads the parameters of a file whose header gave `config` into params (num_parameters).
void read_llmc_params(const std::string& path, const GptConfig& config, float* params);
// Writes a complete file (temporary name, then rename).
void write_llmc_model(const std::string& path, const GptConfig& config, const float* params);

}  // namespace trident::model
