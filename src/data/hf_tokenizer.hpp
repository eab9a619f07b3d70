// Hugging Face's tokenizer.json for byte-level BPE — GPT-2's kind and Llama 3's:
//   model          {"type": "BPE", "vocab": {SYMBOLS: id}, "merges": ["a b", ...] or [["a", "b"], ...],
//                   "ignore_merges": bool, no dropout, byte_fallback, subword prefix or suffix}
//   pre_tokenizer  {"type": "ByteLevel", "use_regex": true} (GPT-2's pattern), or a Sequence of a
//                  Split {"pattern": {"Regex": R} or {"String": S}, "behavior": "Isolated",
//                  "invert": false} and a ByteLevel {"use_regex": false} (Llama 3's: the pattern R)
//   added_tokens   [{"id": N, "content": TEXT, ...}]: matched literally in the text before it is
//                  pre-tokenised (special or not, as tokenizers' encode does)
//   normalizer     null
// Tokens are written in GPT-2's byte symbols (data/bpe_files.hpp); added tokens' contents are
// text. Ids 0 … N−1 must each name one token. Anything else — another model type, a normalizer,
// add_prefix_space, a pre-tokenizer we do not run exactly — is refused, naming the key, rather
// than encoded differently from the file's own library.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trident::data {

struct HfTokenizerSpec {
  std::vector<std::string> tokens;                  // id -> bytes (added tokens: their text)
  std::vector<std::pair<int, int>> merges;          // rank order
  bool ignore_merges = false;
  std::string pattern;                              // the pre-tokenising regular expression
  std::vector<std::pair<std::string, int>> added;   // (text, id)
};

// Reads and checks `path`; throws std::runtime_error "tokenizer file 'PATH': WHAT".
HfTokenizerSpec read_hf_tokenizer(const std::string& path);

}  // namespace trident::data
