// The data directory's tokenizer: its record, loading, and parallel encoding.
#include "data/tokenizer.hpp"

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "core/file_util.hpp"
#include "data/bpe_files.hpp"
#include "data/hf_tokenizer.hpp"

namespace trident::data {
namespace {

const char* kRecordName = "/tokenizer.txt";

std::runtime_error record_error(const std::string& path, const std::string& what) {
  return std::runtime_error("tokenizer record '" + path + "': " + what +
                            "; prepare the data again with `trident prepare`");
}

}  // namespace

std::optional<TokenizerRecord> read_tokenizer_record(const std::string& dir) {
  const std::string path = dir + kRecordName;
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::string text, why;
  if (!read_file(path, 4096, text, why)) throw record_error(path, why);
  const auto values = parse_key_values(text);
  TokenizerRecord record;
  const auto kind = values.find("kind"), vocab = values.find("vocab");
  if (kind == values.end() || vocab == values.end()) throw record_error(path, "needs 'kind = ...' and 'vocab = ...'");
  record.kind = kind->second;
  if (record.kind != "bytes" && record.kind != "bpe" && record.kind != "gpt2" && record.kind != "hf")
    throw record_error(path, "kind '" + record.kind + "' is not bytes, bpe, gpt2 or hf");
  try {
    record.vocab = std::stoi(vocab->second);
  } catch (const std::exception&) {
    throw record_error(path, "vocab '" + vocab->second + "' is not a number");
  }
  if (record.vocab < 1 || record.vocab > kMaxVocab) throw record_error(path, "vocab " + vocab->second + " is out of range");
  return record;
}

void write_tokenizer_record(const std::string& dir, const TokenizerRecord& record) {
  const std::string text = "# written by trident prepare: the tokenizer of this directory's token files\n"
                           "kind = " + record.kind + "\nvocab = " + std::to_string(record.vocab) + "\n";
  const std::string problem = write_atomically(dir + kRecordName, {{text.data(), text.size()}});
  if (!problem.empty()) throw std::runtime_error(problem);
}

Tokenizer Tokenizer::bytes() { return Tokenizer(nullptr, "bytes"); }

Tokenizer::Tokenizer(std::shared_ptr<const Bpe> bpe, std::string kind)
    : bpe_(std::move(bpe)),
      pieces_(&Pretokenizer::gpt2(), [](const Pretokenizer*) {}),  // a static
      kind_(std::move(kind)) {}

Tokenizer Tokenizer::from_hf_file(const std::string& path) {
  HfTokenizerSpec spec = read_hf_tokenizer(path);
  Tokenizer t = bytes();
  t.kind_ = "hf";
  try {
    t.bpe_ = std::make_shared<Bpe>(std::move(spec.tokens), std::move(spec.merges), spec.ignore_merges);
    t.pieces_ = std::make_shared<Pretokenizer>(spec.pattern);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("tokenizer file '" + path + "': " + e.what());
  }
  if (spec.added.empty()) return t;
  // Longest first: where two added tokens start at one place, the longer is the token.
  std::sort(spec.added.begin(), spec.added.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string literals;
  for (const auto& [text, id] : spec.added) {
    literals += (literals.empty() ? "" : "|") + literal_pattern(text);
    t.added_id_.emplace(text, id);
  }
  t.added_ = std::make_shared<Pretokenizer>(literals);
  return t;
}

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::optional<TokenizerRecord> record = read_tokenizer_record(dir);
  if (!record || record->kind == "bytes") return bytes();
  Tokenizer tokenizer = record->kind == "hf" ? from_hf_file(dir + "/" + kHfTokenizerFile)
                                             : Tokenizer(std::make_shared<Bpe>(read_gpt2_files(dir)), record->kind);
  if (tokenizer.vocab() != record->vocab)
    throw record_error(dir + kRecordName, "says vocab " + std::to_string(record->vocab) + " but the vocabulary has " +
                                              std::to_string(tokenizer.vocab()) + " tokens");
  return tokenizer;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, size_t chunk_bytes,
                                        const std::function<void(size_t, size_t)>& progress) const {
  if (!bpe_) return std::vector<TokenId>(reinterpret_cast<const unsigned char*>(text.data()),
                                         reinterpret_cast<const unsigned char*>(text.data()) + text.size());
  // Work items: an added token (its id), or a chunk [begin, end) of a stretch of text between
  // added tokens, which is pre-tokenised on its own (tokenizers' rule: a pattern does not see
  // across an added token).
  struct Chunk {
    std::string_view stretch;
    size_t begin = 0, end = 0;
    int added = -1;
  };
  std::vector<Chunk> chunks;
  auto add_stretch = [&](std::string_view stretch) {
    const std::vector<size_t> cuts = pieces_->cuts(stretch, std::max<size_t>(chunk_bytes, 1));
    for (size_t i = 0; i + 1 < cuts.size(); ++i) chunks.push_back({stretch, cuts[i], cuts[i + 1]});
  };
  if (!added_) add_stretch(text);
  else
    added_->split(text, 0, text.size(), [&](std::string_view piece, bool matched) {
      if (matched) chunks.push_back({piece, 0, piece.size(), added_id_.at(std::string(piece))});
      else add_stretch(piece);
    });
  std::vector<std::vector<TokenId>> parts(chunks.size());
  size_t done = 0;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& k = chunks[c];
    parts[c] = k.added >= 0 ? std::vector<TokenId>{static_cast<TokenId>(k.added)}
                            : bpe_->encode(k.stretch, k.begin, k.end, *pieces_);
#pragma omp critical(trident_encode_progress)
    {
      done += k.end - k.begin;
      if (progress) progress(done, text.size());
    }
  }
  std::vector<TokenId> tokens;
  for (const auto& part : parts) tokens.insert(tokens.end(), part.begin(), part.end());
  return tokens;
}

std::string Tokenizer::decode(const TokenId* ids, size_t n) const {
  if (bpe_) return bpe_->decode(ids, n);
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] > 255) throw std::out_of_range("token " + std::to_string(ids[i]) + " is not a byte (vocabulary 256)");
    text += static_cast<char>(ids[i]);
  }
  return text;
}

std::string data_directory(const std::string& pattern) {
  const size_t slash = pattern.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : pattern.substr(0, slash);
}

}  // namespace trident::data
