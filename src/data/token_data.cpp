// Token files, read with pread.
#include "data/token_data.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "core/error.hpp"
#include "core/file_util.hpp"

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

// The llm.c header (magic, version, token count) of an open file, checked against its size.
void read_llmc_header(const std::string& path, int fd, int64_t file_bytes, int64_t& count, int64_t& offset,
                      int& token_bytes) {
  int32_t header[3] = {0, 0, 0};
  if (file_bytes < static_cast<int64_t>(kHeaderBytes) || pread(fd, header, sizeof header, 0) != sizeof header)
    throw data_error(path, "shorter than its 1024-byte header");
  if (header[0] != kLlmcTokensMagic && header[0] != kLlmcWideTokensMagic)
    throw data_error(path, "bad magic " + std::to_string(header[0]) + " (expected " + std::to_string(kLlmcTokensMagic) +
                               " for uint16 tokens or " + std::to_string(kLlmcWideTokensMagic) +
                               " for uint32); for raw uint16 tokens set data.format = u16");
  const bool wide = header[0] == kLlmcWideTokensMagic;
  const int version = wide ? kLlmcWideTokensVersion : kLlmcTokensVersion;
  if (header[1] != version)
    throw data_error(path, "version " + std::to_string(header[1]) + " is not supported (expected " +
                               std::to_string(version) + " with magic " + std::to_string(header[0]) + ")");
  count = header[2];
  offset = static_cast<int64_t>(kHeaderBytes);
  token_bytes = wide ? 4 : 2;
  const int64_t expected = offset + count * token_bytes;
  if (count < 0 || file_bytes != expected)
    throw data_error(path, "is " + std::to_string(file_bytes) + " bytes but its header promises " + std::to_string(count) +
                               " tokens (" + std::to_string(expected) + " bytes): truncated?");
}

}  // namespace

TokenFormat parse_token_format(const std::string& name) {
  if (name == "llmc") return TokenFormat::Llmc;
  if (name == "u16") return TokenFormat::U16;
  throw std::invalid_argument("unknown token format '" + name + "'");
}

TokenData::TokenData(const std::string& pattern, TokenFormat format, int vocab) : vocab_(vocab) {
  paths_ = expand_glob(pattern);
  if (paths_.empty()) throw data_error(pattern, "no such file (or no file matches the pattern)");
  for (const std::string& path : paths_) {
    starts_.push_back(total_);
    shards_.push_back(open_shard(path, format));
    total_ += shards_.back().count;
    check_tokens(shards_.size() - 1);
  }
}

TokenData::~TokenData() {
  for (Shard& shard : shards_)
    if (shard.fd >= 0) close(shard.fd);
}

TokenData::Shard TokenData::open_shard(const std::string& path, TokenFormat format) const {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; fstat then refuses it.
  Shard shard;
  shard.fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (shard.fd < 0) throw data_error(path, std::strerror(errno));
  struct stat info {};
  const std::string not_file = fstat(shard.fd, &info) != 0 ? std::strerror(errno) : file_type_problem(info.st_mode);
  if (!not_file.empty()) {
    close(shard.fd);
    throw data_error(path, not_file + "; give token files made by `trident prepare`");
  }
  shard.file_bytes = static_cast<int64_t>(info.st_size);
  try {
    if (format == TokenFormat::Llmc) read_llmc_header(path, shard.fd, shard.file_bytes, shard.count, shard.offset, shard.token_bytes);
    else if (shard.file_bytes % 2 != 0) throw data_error(path, "odd size: not a file of uint16 tokens");
    else shard.count = shard.file_bytes / 2;
  } catch (...) {
    close(shard.fd);
    throw;
  }
  return shard;
}

void TokenData::check_tokens(size_t index) const {
  const Shard& shard = shards_[index];
  std::vector<TokenId> chunk(size_t(1) << 18);  // 1 MiB at a time
  for (int64_t first = 0; first < shard.count; first += static_cast<int64_t>(chunk.size())) {
    const int64_t count = std::min<int64_t>(static_cast<int64_t>(chunk.size()), shard.count - first);
    const std::string problem = read_shard(index, first, count, chunk.data());
    if (!problem.empty()) throw std::runtime_error(problem);
    for (int64_t i = 0; i < count; ++i)
      if (chunk[i] >= static_cast<TokenId>(vocab_))
        throw data_error(paths_[index], "token " + std::to_string(chunk[i]) + " at position " + std::to_string(first + i) +
                                            " is not below the vocabulary size " + std::to_string(vocab_) + " (model.vocab)");
  }
}

// Tokens [first, first + count) of one shard; "" or what went wrong. A short read means the
// file is shorter than when it was opened.
// 16-bit tokens are read into the front of `out` and widened in place, from the last.
std::string TokenData::read_shard(size_t index, int64_t first, int64_t count, TokenId* out) const {
  const Shard& shard = shards_[index];
  char* at = reinterpret_cast<char*>(out);
  const int64_t offset = shard.offset + first * shard.token_bytes;
  int64_t done = 0, wanted = count * shard.token_bytes;
  while (done < wanted) {
    const ssize_t got = pread(shard.fd, at + done, static_cast<size_t>(wanted - done), offset + done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return data_error(paths_[index], std::string("read error: ") + std::strerror(errno)).what();
    if (got == 0) {
      struct stat info {};
      fstat(shard.fd, &info);
      return data_error(paths_[index], "changed under the job: it was " + std::to_string(shard.file_bytes) +
                                           " bytes when opened and is " + std::to_string(info.st_size) +
                                           " now (bytes " + std::to_string(offset + done) + " to " +
                                           std::to_string(offset + wanted) + " are gone); do not modify "
                                           "or truncate data files while a job reads them")
          .what();
    }
    done += got;
  }
  if (shard.token_bytes == 2) {
    const auto* narrow = reinterpret_cast<const uint16_t*>(out);
    for (int64_t i = count - 1; i >= 0; --i) out[i] = narrow[i];  // out[i]'s bytes lie beyond narrow[i]'s
  }
  return "";
}

std::string TokenData::read(int64_t start, int64_t count, int32_t* out) const {
  if (start < 0 || start + count > total_) throw std::out_of_range("token range outside the data");
  std::vector<TokenId> tokens(static_cast<size_t>(count));
  size_t shard = std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin() - 1;
  for (int64_t done = 0; done < count; ++shard) {
    const int64_t first = start + done - starts_[shard];
    const int64_t n = std::min(count - done, shards_[shard].count - first);
    if (n <= 0) continue;  // an empty shard, or the end of this one
    const std::string problem = read_shard(shard, first, n, tokens.data() + done);
    if (!problem.empty()) return problem;
    for (int64_t i = 0; i < n; ++i) {
      const TokenId token = tokens[static_cast<size_t>(done + i)];
      if (token >= static_cast<TokenId>(vocab_))  // checked when opened: the file was rewritten since
        return data_error(paths_[shard], "changed under the job: token " + std::to_string(token) + " at position " +
                                             std::to_string(first + i) + " is not below the vocabulary size " +
                                             std::to_string(vocab_) + " (it was when the job opened it); do not "
                                             "modify data files while a job reads them").what();
      out[done + i] = static_cast<int32_t>(token);
    }
    done += n;
  }
  return "";
}

void TokenData::copy(int64_t start, int64_t count, int32_t* out) const {
  const std::string problem = read(start, count, out);
  if (!problem.empty()) fatal_one(problem);
}

void write_llmc_tokens(const std::string& path, const std::vector<TokenId>& tokens, int vocab) {
  const bool wide = vocab > 65536;
  int32_t header[256] = {0};
  header[0] = wide ? kLlmcWideTokensMagic : kLlmcTokensMagic;
  header[1] = wide ? kLlmcWideTokensVersion : kLlmcTokensVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::vector<uint16_t> narrow(wide ? 0 : tokens.size());
  for (size_t i = 0; i < narrow.size(); ++i) narrow[i] = static_cast<uint16_t>(tokens[i]);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
    if (wide) out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(TokenId));
    else out.write(reinterpret_cast<const char*>(narrow.data()), narrow.size() * sizeof(uint16_t));
    out.flush();
    if (!out) throw data_error(temporary, std::string("write failed: ") + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw data_error(path, std::string("rename failed: ") + std::strerror(errno));
}

}  // namespace trident::data
