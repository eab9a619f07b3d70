// Token data: llm.c shards — 256 × int32 header (magic, version, token count), then the tokens:
// GPT-2's kind (magic 20240520, version 1) uint16, Llama 3's (magic 20240801, version 7) uint32
// for vocabularies beyond 65,536, each shard read as its header says — or raw uint16 files
// (nanoGPT's train.bin); one file or a glob of several read as one stream in sorted name order. Every token is checked against the vocabulary when the data
// is opened. Windows are read with pread, not through a memory mapping: a mapped file truncated
// under a running job kills the process with SIGBUS at an arbitrary load, while a read returns
// short, which we report naming the file (see TokenData::read).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe.hpp"

namespace trident::data {

constexpr int kLlmcTokensMagic = 20240520;  // uint16 tokens
constexpr int kLlmcTokensVersion = 1;
constexpr int kLlmcWideTokensMagic = 20240801;  // uint32 tokens (llm.c's Llama 3 shards)
constexpr int kLlmcWideTokensVersion = 7;

enum class TokenFormat { Llmc, U16 };
TokenFormat parse_token_format(const std::string& name);  // "llmc" | "u16"

class TokenData {
 public:
  // Opens every file matching `pattern`. Throws std::runtime_error naming the file and the
  // problem: no match, not a regular file (a FIFO would block), unreadable, wrong magic or
  // version, truncated, a token >= vocab.
  TokenData(const std::string& pattern, TokenFormat format, int vocab);
  ~TokenData();
  TokenData(const TokenData&) = delete;
  TokenData& operator=(const TokenData&) = delete;

  int64_t size() const { return total_; }  // tokens over all files
  const std::vector<std::string>& files() const { return paths_; }
  // tokens[start, start + count) of the concatenated stream, as int32; "" or, when a file no
  // longer holds what it held when opened (truncated, or a token now >= vocab), what changed,
  // naming the file.
  std::string read(int64_t start, int64_t count, int32_t* out) const;
  // read(), and a file changed under the job is a fault of this rank (fatal_one, exit 1).
  void copy(int64_t start, int64_t count, int32_t* out) const;

 private:
  struct Shard {
    int fd = -1;
    int64_t count = 0;       // tokens
    int64_t offset = 0;      // bytes before the first token (the llm.c header)
    int64_t file_bytes = 0;  // the size when opened
    int token_bytes = 2;     // 2 or 4
  };
  Shard open_shard(const std::string& path, TokenFormat format) const;
  void check_tokens(size_t shard) const;  // every token below vocab_, in chunks
  std::string read_shard(size_t shard, int64_t first, int64_t count, TokenId* out) const;

  std::vector<std::string> paths_;
  std::vector<Shard> shards_;
  std::vector<int64_t> starts_;  // first global index of each shard
  int64_t total_ = 0;
  int vocab_ = 0;
};

// Writes an llm.c token shard (temporary name, then rename): uint16 tokens (GPT-2's kind) when
// the vocabulary has at most 65,536, else uint32 (Llama 3's kind).
void write_llmc_tokens(const std::string& path, const std::vector<TokenId>& tokens, int vocab);

}  // namespace trident::data
