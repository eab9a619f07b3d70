// llm.c model files.
#include "model/llmc_io.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "core/file_util.hpp"
#include "model/params.hpp"

namespace trident::model {
namespace {

constexpr size_t kHeaderInts = 256;

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error("llm.c model file '" + path + "': " + what);
}

// By type first (stat never blocks): opening a FIFO for reading waits for a writer.
std::ifstream open_checked(const std::string& path) {
  const std::string not_file = regular_file_problem(path);
  if (!not_file.empty()) throw file_error(path, not_file);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error(path, std::strerror(errno));
  return in;
}

}  // namespace

GptConfig read_llmc_header(const std::string& path) {
  std::ifstream in = open_checked(path);
  int32_t header[kHeaderInts] = {0};
  in.read(reinterpret_cast<char*>(header), sizeof(header));
  if (in.gcount() != static_cast<std::streamsize>(sizeof(header)))
    throw file_error(path, "shorter than its 1024-byte header");
  if (header[0] != kLlmcModelMagic)
    throw file_error(path, "bad magic " + std::to_string(header[0]) + " (expected " +
                               std::to_string(kLlmcModelMagic) + "): not an llm.c model file");
  if (header[1] != kLlmcModelVersionFp32)
    throw file_error(path, "version " + std::to_string(header[1]) +
                               " is not supported; only version 3 (fp32 parameters) is");
  GptConfig c;
  c.max_seq_len = header[2], c.vocab = header[3], c.layers = header[4];
  c.heads = header[5], c.channels = header[6], c.padded_vocab = header[7];
  const std::string problem = config_problem(c);
  if (!problem.empty()) throw file_error(path, "header: " + problem);
  in.seekg(0, std::ios::end);
  const int64_t expected = sizeof(header) + num_parameters(c) * int64_t(sizeof(float));
  const int64_t actual = in.tellg();
  if (actual != expected)
    throw file_error(path, "is " + std::to_string(actual) + " bytes but its header describes " +
                               std::to_string(expected) + " (truncated or not fp32)");
  return c;
}

void read_llmc_params(const std::string& path, const GptConfig& config, float* params) {
  std::ifstream in = open_checked(path);
  in.seekg(kHeaderInts * sizeof(int32_t));
  const std::streamsize bytes = num_parameters(config) * sizeof(float);
  in.read(reinterpret_cast<char*>(params), bytes);
  if (in.gcount() != bytes) throw file_error(path, "truncated while reading the parameters");
}

void write_llmc_model(const std::string& path, const GptConfig& config, const float* params) {
  if (is_llama(config)) throw file_error(path, "llm.c's GPT-2 file cannot hold a llama model");
  int32_t header[kHeaderInts] = {0};
  header[0] = kLlmcModelMagic, header[1] = kLlmcModelVersionFp32;
  header[2] = config.max_seq_len, header[3] = config.vocab, header[4] = config.layers;
  header[5] = config.heads, header[6] = config.channels, header[7] = config.padded_vocab;
  const std::string problem =
      write_atomically(path, {{header, sizeof(header)}, {params, num_parameters(config) * sizeof(float)}});
  if (!problem.empty()) throw file_error(path, problem);
}

}  // namespace trident::model
