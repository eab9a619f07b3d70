// Learning a byte-level BPE vocabulary from pair frequencies (GPT-2's scheme).
#include <algorithm>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "data/bpe.hpp"
#include "data/pretokenize.hpp"

namespace trident::data {
namespace {

uint64_t pair_key(int left, int right) { return static_cast<uint64_t>(left) << 32 | static_cast<uint32_t>(right); }
int left_of(uint64_t key) { return static_cast<int>(key >> 32); }
int right_of(uint64_t key) { return static_cast<int>(key & 0xFFFFFFFFu); }

// The distinct pieces of the texts and how often each occurs, as symbol (token id) sequences.
struct Words {
  std::vector<std::vector<int>> symbols;
  std::vector<int64_t> counts;
};

Words count_words(const std::vector<std::string_view>& texts, const int* byte_token) {
  std::unordered_map<std::string_view, int64_t> counts;
  for (std::string_view text : texts)
    Pretokenizer::gpt2().split(text, 0, text.size(), [&](std::string_view piece, bool) { ++counts[piece]; });
  // Sorted pieces: the word order, and so every tie below, does not depend on hashing.
  std::vector<std::pair<std::string_view, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());
  Words words;
  for (const auto& [piece, count] : sorted) {
    std::vector<int> ids;
    for (unsigned char byte : piece) ids.push_back(byte_token[byte]);
    words.symbols.push_back(std::move(ids));
    words.counts.push_back(count);
  }
  return words;
}

// Pair counts over all words, which words hold each pair (a superset: entries go stale), and a
// max-heap of (count, pair) in which an entry whose count has changed since is stale.
class PairTable {
 public:
  explicit PairTable(const Words& words) {
    for (size_t w = 0; w < words.symbols.size(); ++w) add_word(words, static_cast<int>(w), +1);
    for (const auto& [key, count] : counts_) push(key);
  }
  // The most frequent pair (ties: lower key) occurring at least twice; false when none does.
  bool best(uint64_t& key) {
    while (!heap_.empty()) {
      const auto [count, negated] = heap_.top();
      const uint64_t k = ~negated;
      const auto it = counts_.find(k);
      if (it == counts_.end() || it->second != count) {
        heap_.pop();
        continue;
      }
      if (count < 2) return false;
      key = k;
      return true;
    }
    return false;
  }
  // Adds (sign +1) or removes (-1) the pairs of word w; changed pairs are noted for push_changed.
  void add_word(const Words& words, int w, int sign) {
    const std::vector<int>& s = words.symbols[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t key = pair_key(s[i], s[i + 1]);
      int64_t& count = counts_[key];
      count += sign * words.counts[w];
      if (sign > 0) holders_[key].push_back(w);
      changed_.push_back(key);
    }
  }
  void push_changed() {
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
    for (uint64_t key : changed_) push(key);
    changed_.clear();
  }
  std::vector<int> take_holders(uint64_t key) {
    std::vector<int> words = std::move(holders_[key]);
    holders_.erase(key);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    return words;
  }

 private:
  void push(uint64_t key) {
    const auto it = counts_.find(key);
    if (it == counts_.end()) return;
    if (it->second <= 0) {
      counts_.erase(it);
      return;
    }
    heap_.emplace(it->second, ~key);  // ~key: the lower key wins a tie in a max-heap
  }
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::vector<int>> holders_;
  std::priority_queue<std::pair<int64_t, uint64_t>> heap_;
  std::vector<uint64_t> changed_;
};

// Replaces every occurrence of (left, right) in the symbols, left to right, by merged.
void merge_in_word(std::vector<int>& s, int left, int right, int merged) {
  size_t out = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
      s[out++] = merged;
      ++i;
    } else {
      s[out++] = s[i];
    }
  }
  s.resize(out);
}

}  // namespace

Bpe train_bpe(const std::vector<std::string_view>& texts, int vocab, const std::function<void(int, int)>& progress) {
  if (vocab < 256 || vocab > kMaxVocab)
    throw std::invalid_argument("the vocabulary must have 256 to " + std::to_string(kMaxVocab) + " tokens, not " +
                                std::to_string(vocab));
  std::vector<std::string> tokens;
  int byte_token[256];
  for (unsigned char byte : gpt2_byte_order()) {
    byte_token[byte] = static_cast<int>(tokens.size());
    tokens.emplace_back(1, static_cast<char>(byte));
  }
  Words words = count_words(texts, byte_token);
  PairTable pairs(words);
  std::vector<std::pair<int, int>> merges;
  const int wanted = vocab - 256;
  uint64_t key = 0;
  while (static_cast<int>(merges.size()) < wanted && pairs.best(key)) {
    const int left = left_of(key), right = right_of(key), merged = static_cast<int>(tokens.size());
    merges.emplace_back(left, right);
    tokens.push_back(tokens[left] + tokens[right]);
    for (int w : pairs.take_holders(key)) {
      pairs.add_word(words, w, -1);
      merge_in_word(words.symbols[w], left, right, merged);
      pairs.add_word(words, w, +1);
    }
    pairs.push_changed();
    if (progress && merges.size() % 1000 == 0) progress(static_cast<int>(merges.size()), wanted);
  }
  return Bpe(std::move(tokens), std::move(merges));
}

}  // namespace trident::data
