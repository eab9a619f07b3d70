// Byte-level BPE (GPT-2's scheme): a vocabulary of byte strings among which are the 256 single
// bytes, and merges in rank order, each joining two tokens into a third. Encoding cuts the text
// into pieces (data/pretokenize.hpp), starts each piece as its bytes and applies the merges
// lowest rank first, every occurrence left to right — exactly OpenAI's encoder.py bpe() and
// Hugging Face's BPE model. With ignore_merges (Hugging Face's option, Llama 3's tokenizer: what
// tiktoken does) a piece that is itself a token is that token, merges or not. Decoding
// concatenates the tokens' bytes, so decode(encode(x)) == x for any bytes.
// Ids are TokenId (32 bits); token files hold them in 16 bits where the vocabulary allows
// (data/token_data.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/pretokenize.hpp"

namespace trident::data {

using TokenId = uint32_t;
constexpr int kMaxVocab = 1 << 24;  // model.vocab's largest

class Bpe {
 public:
  // tokens: id -> bytes; every single byte must be a token. merges: (left id, right id) in rank
  // order; the concatenation of the two must be a token. Throws std::invalid_argument saying
  // which rule a vocabulary breaks.
  Bpe(std::vector<std::string> tokens, std::vector<std::pair<int, int>> merges, bool ignore_merges = false);

  int vocab() const { return static_cast<int>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<std::pair<int, int>>& merges() const { return merges_; }

  bool ignore_merges() const { return ignore_merges_; }
  int find(std::string_view bytes) const;  // the token of these bytes, or -1

  // One piece of pre-tokenised text, appended to out.
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
  // text[begin, end) cut by `pieces` (Pretokenizer::split's rule for begin and end), serially;
  // pieces seen before in this call come from a cache.
  std::vector<TokenId> encode(std::string_view text, size_t begin, size_t end, const Pretokenizer& pieces) const;
  // The whole text with GPT-2's pattern.
  std::vector<TokenId> encode(std::string_view text) const {
    return encode(text, 0, text.size(), Pretokenizer::gpt2());
  }
  std::string decode(const TokenId* ids, size_t n) const;  // ids < vocab()

 private:
  struct Merge {
    int rank, merged;
  };
  const Merge* merge_of(int left, int right) const;

  std::vector<std::string> tokens_;
  std::vector<std::pair<int, int>> merges_;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int> id_of_;  // bytes -> token (the first, where two are equal)
  int byte_token_[256];
  std::unordered_map<uint64_t, Merge> merge_of_;  // key left << 32 | right
};

// Learns a vocabulary of at most `vocab` tokens (>= 256) from the texts: the 256 bytes in
// GPT-2's order (gpt2_byte_order()), then, while the vocabulary has room, the most frequent
// adjacent pair within the pieces of the texts becomes a merge (ties: the pair of lower ids).
// Stops early when no pair occurs twice. progress(merges done, merges wanted), if given, is
// called now and then.
Bpe train_bpe(const std::vector<std::string_view>& texts, int vocab,
              const std::function<void(int, int)>& progress = {});

// GPT-2's order of the single bytes: token i of a GPT-2 vocabulary is byte gpt2_byte_order()[i]
// (the printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' first, then the others).
const std::vector<unsigned char>& gpt2_byte_order();

}  // namespace trident::data
