// Memory-mapped token files.
#include "data/token_data.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace trident::data {
namespace {

constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);

std::runtime_error data_error(const std::string& path, const std::string& what) {
  return std::runtime_error("token file '" + path + "': " + what);
}

std::vector<std::string> expand_glob(const std::string& pattern) {
  glob_t matches{};
  const int status = glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches);
  std::vector<std::string> paths;
  if (status == 0)
    for (size_t i = 0; i < matches.gl_pathc; ++i) paths.emplace_back(matches.gl_pathv[i]);
  globfree(&matches);
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

TokenFormat parse_token_format(const std::string& name) {
  if (name == "llmc") return TokenFormat::Llmc;
  if (name == "u16") return TokenFormat::U16;
  throw std::invalid_argument("unknown token format '" + name + "'");
}

TokenData::TokenData(const std::string& pattern, TokenFormat format, int vocab) {
  paths_ = expand_glob(pattern);
  if (paths_.empty()) throw data_error(pattern, "no such file (or no file matches the pattern)");
  for (const std::string& path : paths_) {
    starts_.push_back(total_);
    shards_.push_back(open_shard(path, format, vocab));
    total_ += shards_.back().count;
  }
}

TokenData::~TokenData() {
  for (Shard& shard : shards_)
    if (shard.mapping) munmap(shard.mapping, shard.mapping_bytes);
}

TokenData::Shard TokenData::open_shard(const std::string& path, TokenFormat format,
                                       int vocab) const {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) throw data_error(path, std::strerror(errno));
  struct stat info {};
  fstat(fd, &info);
  Shard shard;
  shard.mapping_bytes = static_cast<size_t>(info.st_size);
  if (shard.mapping_bytes > 0) {
    shard.mapping = mmap(nullptr, shard.mapping_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (shard.mapping == MAP_FAILED) {
      close(fd);
      throw data_error(path, std::string("cannot map: ") + std::strerror(errno));
    }
  }
  close(fd);
  const char* bytes = static_cast<const char*>(shard.mapping);
  size_t offset = 0;
  if (format == TokenFormat::Llmc) {
    if (shard.mapping_bytes < kHeaderBytes) throw data_error(path, "shorter than its 1024-byte header");
    int32_t header[3];
    std::memcpy(header, bytes, sizeof(header));
    if (header[0] != kLlmcTokensMagic)
      throw data_error(path, "bad magic " + std::to_string(header[0]) + " (expected " +
                                 std::to_string(kLlmcTokensMagic) + "); for raw uint16 tokens set data.format = u16");
    if (header[1] != kLlmcTokensVersion)
      throw data_error(path, "version " + std::to_string(header[1]) + " is not supported (expected 1)");
    shard.count = header[2];
    offset = kHeaderBytes;
    if (shard.mapping_bytes != kHeaderBytes + size_t(shard.count) * 2)
      throw data_error(path, "is " + std::to_string(shard.mapping_bytes) + " bytes but its header promises " +
                                 std::to_string(shard.count) + " tokens (" +
                                 std::to_string(kHeaderBytes + size_t(shard.count) * 2) + " bytes): truncated?");
  } else {
    if (shard.mapping_bytes % 2 != 0) throw data_error(path, "odd size: not a file of uint16 tokens");
    shard.count = static_cast<int64_t>(shard.mapping_bytes / 2);
  }
  shard.tokens = reinterpret_cast<const uint16_t*>(bytes + offset);
  for (int64_t i = 0; i < shard.count; ++i)
    if (shard.tokens[i] >= vocab)
      throw data_error(path, "token " + std::to_string(shard.tokens[i]) + " at position " +
                                 std::to_string(i) + " is not below the vocabulary size " +
                                 std::to_string(vocab) + " (model.vocab)");
  return shard;
}

void TokenData::copy(int64_t start, int64_t count, int32_t* out) const {
  if (start < 0 || start + count > total_) throw std::out_of_range("token range outside the data");
  size_t shard = std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin() - 1;
  for (int64_t i = 0; i < count; ++i) {
    while (start + i >= starts_[shard] + shards_[shard].count) ++shard;
    out[i] = shards_[shard].tokens[start + i - starts_[shard]];
  }
}

void write_llmc_tokens(const std::string& path, const std::vector<uint16_t>& tokens) {
  int32_t header[256] = {0};
  header[0] = kLlmcTokensMagic, header[1] = kLlmcTokensVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
    out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(uint16_t));
    out.flush();
    if (!out) throw data_error(temporary, std::string("write failed: ") + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw data_error(path, std::string("rename failed: ") + std::strerror(errno));
}

}  // namespace trident::data
