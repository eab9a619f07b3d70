// Token data: llm.c shards (256 × int32 header — magic 20240520, version 1, token count — then
// uint16 tokens) or raw uint16 files (nanoGPT's train.bin), one file or a glob of several read
// as one stream in sorted name order. Files are memory-mapped; every token is checked against
// the vocabulary once, when the data is opened.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::data {

constexpr int kLlmcTokensMagic = 20240520;
constexpr int kLlmcTokensVersion = 1;

enum class TokenFormat { Llmc, U16 };
TokenFormat parse_token_format(const std::string& name);  // "llmc" | "u16"

class TokenData {
 public:
  // Opens every file matching `pattern`. Throws std::runtime_error naming the file and the
  // problem: no match, unreadable, wrong magic or version, truncated, a token >= vocab.
  TokenData(const std::string& pattern, TokenFormat format, int vocab);
  ~TokenData();
  TokenData(const TokenData&) = delete;
  TokenData& operator=(const TokenData&) = delete;

  int64_t size() const { return total_; }  // tokens over all files
  const std::vector<std::string>& files() const { return paths_; }
  // tokens[start, start + count) of the concatenated stream, as int32
  void copy(int64_t start, int64_t count, int32_t* out) const;

 private:
  struct Shard {
    const uint16_t* tokens = nullptr;  // into the mapping
    int64_t count = 0;
    void* mapping = nullptr;
    size_t mapping_bytes = 0;
  };
  Shard open_shard(const std::string& path, TokenFormat format, int vocab) const;

  std::vector<std::string> paths_;
  std::vector<Shard> shards_;
  std::vector<int64_t> starts_;  // first global index of each shard
  int64_t total_ = 0;
};

// Writes an llm.c token shard (temporary name, then rename).
void write_llmc_tokens(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace trident::data
