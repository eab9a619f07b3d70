// The tokenizer of a data directory: bytes (vocabulary 256, token = byte), or byte-level BPE —
// trained by `trident prepare --tokenizer=bpe`, GPT-2's files (--tokenizer=gpt2), or a Hugging
// Face tokenizer.json (--tokenizer=hf: GPT-2's or Llama 3's kind, data/hf_tokenizer.hpp). The
// directory records which in DIR/tokenizer.txt ("kind = bytes | bpe | gpt2 | hf", "vocab = N");
// a BPE's vocabulary sits beside it as encoder.json and vocab.bpe (data/bpe_files.hpp), a Hugging
// Face one as the file itself, tokenizer.json. A directory without tokenizer.txt (made before it
// existed, or by hand) is byte-level.
//
// Encoding: a Hugging Face tokenizer's added tokens are found first (literally, anywhere in the
// text, as tokenizers' encode does); the text between them is cut into pieces by the
// tokenizer's pattern (data/pretokenize.hpp: GPT-2's for bpe and gpt2) and each piece merged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/bpe.hpp"

namespace trident::data {

constexpr const char* kHfTokenizerFile = "tokenizer.json";

struct TokenizerRecord {
  std::string kind;  // "bytes" | "bpe" | "gpt2" | "hf"
  int vocab = 0;
};
// DIR/tokenizer.txt, or nothing when the directory has none. Throws std::runtime_error naming
// the file when it is there but unreadable or malformed.
std::optional<TokenizerRecord> read_tokenizer_record(const std::string& dir);
void write_tokenizer_record(const std::string& dir, const TokenizerRecord& record);

class Tokenizer {
 public:
  static Tokenizer bytes();
  // A BPE with GPT-2's pattern and no added tokens (kinds bpe and gpt2).
  explicit Tokenizer(std::shared_ptr<const Bpe> bpe, std::string kind);
  // A Hugging Face tokenizer.json (kind hf); throws std::runtime_error naming the file.
  static Tokenizer from_hf_file(const std::string& path);
  // The tokenizer DIR records (bytes without a record); throws std::runtime_error naming the
  // file and the problem.
  static Tokenizer load(const std::string& dir);

  const std::string& kind() const { return kind_; }
  int vocab() const { return bpe_ ? bpe_->vocab() : 256; }
  const Bpe* bpe() const { return bpe_.get(); }

  // Encoding in chunks of about chunk_bytes cut at piece boundaries found by a serial scan
  // (Pretokenizer::cuts: so the tokens are those of one serial pass), OpenMP threads over the
  // chunks. progress(bytes done, total) is called from one thread at a time after each chunk.
  std::vector<TokenId> encode(std::string_view text, size_t chunk_bytes = kChunkBytes,
                               const std::function<void(size_t, size_t)>& progress = {}) const;
  std::string decode(const TokenId* ids, size_t n) const;
  std::string decode(const std::vector<TokenId>& ids) const { return decode(ids.data(), ids.size()); }

  static constexpr size_t kChunkBytes = size_t(1) << 20;

 private:
  std::shared_ptr<const Bpe> bpe_;            // null: bytes
  std::shared_ptr<const Pretokenizer> pieces_;  // the pre-tokenising pattern
  std::shared_ptr<const Pretokenizer> added_;   // the added tokens as literals, longest first; null: none
  std::unordered_map<std::string, int> added_id_;
  std::string kind_ = "bytes";
};

// The directory a data.train / data.val pattern reads from ("." for a bare name).
std::string data_directory(const std::string& pattern);

}  // namespace trident::data
