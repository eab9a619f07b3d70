// Pre-tokenising: text cut into pieces by a regular expression, before BPE merges (which never
// cross a piece boundary). The expression is the tokenizer's own — GPT-2's
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (contractions; a run of letters, of numbers or of other characters, each with an optional
// leading space; a whitespace run that leaves its last character to the word that follows), or
// the one a Hugging Face tokenizer.json gives (Llama 3's, say) — run by PCRE2 with Unicode
// properties (UTF and UCP: \s, \p{L}, \p{N} are Unicode's classes) and its JIT.
//
// The pieces cover the text: each match, and each run of text between two matches (Hugging
// Face's Split with behavior "Isolated"). Bytes that are not valid UTF-8 match no class
// (PCRE2_MATCH_INVALID_UTF): they fall between matches, so any byte string pre-tokenises and
// round-trips byte-exactly.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace trident::data {

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A pattern that matches `text` literally (PCRE2's \Q…\E, with any "\E" inside spelled out).
std::string literal_pattern(const std::string& text);

class Pretokenizer {
 public:
  // Compiles `pattern`; throws std::invalid_argument with PCRE2's message and the offset.
  explicit Pretokenizer(const std::string& pattern);
  static const Pretokenizer& gpt2();  // kGpt2Pattern, compiled once
  const std::string& pattern() const { return pattern_; }

  // piece(p, matched) for each piece of text[begin, end) in order, matched: a match (else text
  // between matches). The scan starts at `begin` with the whole text visible to look-behind and
  // look-ahead; `begin` and `end` must be piece boundaries of the whole text (0, text.size(), or
  // from cuts()): a match is not cut at `end`. Thread-safe.
  void split(std::string_view text, size_t begin, size_t end,
             const std::function<void(std::string_view, bool)>& piece) const;
  std::vector<std::string_view> pieces(std::string_view text) const;  // every piece of text
  // Piece boundaries about `bytes` apart, from 0 to text.size(): splitting each [cut, next cut)
  // gives the pieces of the whole text, in order. A serial scan (PCRE2's JIT: about 150 MB/s
  // here), so that parallel encoding gives exactly the serial tokens for any expression.
  std::vector<size_t> cuts(std::string_view text, size_t bytes) const;

 private:
  std::string pattern_;
  std::shared_ptr<void> code_;  // pcre2_code_8
};

}  // namespace trident::data
