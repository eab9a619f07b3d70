// Byte-level BPE: encoding by merge rank, decoding.
#include "data/bpe.hpp"

#include <queue>
#include <stdexcept>


namespace trident::data {
namespace {

uint64_t pair_key(int left, int right) { return static_cast<uint64_t>(left) << 32 | static_cast<uint32_t>(right); }

}  // namespace

Bpe::Bpe(std::vector<std::string> tokens, std::vector<std::pair<int, int>> merges, bool ignore_merges)
    : tokens_(std::move(tokens)), merges_(std::move(merges)), ignore_merges_(ignore_merges) {
  if (tokens_.size() > static_cast<size_t>(kMaxVocab))
    throw std::invalid_argument(std::to_string(tokens_.size()) + " tokens: more than the " +
                                std::to_string(kMaxVocab) + " a model may have (model.vocab)");
  std::unordered_map<std::string, int>& id_of = id_of_;
  for (size_t id = 0; id < tokens_.size(); ++id) id_of.emplace(tokens_[id], static_cast<int>(id));
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = id_of.find(std::string(1, static_cast<char>(byte)));
    if (it == id_of.end()) throw std::invalid_argument("byte " + std::to_string(byte) + " is not a token");
    byte_token_[byte] = it->second;
  }
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto [left, right] = merges_[rank];
    if (left < 0 || right < 0 || left >= vocab() || right >= vocab())
      throw std::invalid_argument("merge " + std::to_string(rank) + " names a token outside the vocabulary");
    const auto it = id_of.find(tokens_[left] + tokens_[right]);
    if (it == id_of.end())
      throw std::invalid_argument("merge " + std::to_string(rank) + " makes a token that is not in the vocabulary");
    // A pair listed twice keeps its last rank, as encoder.py's dict(zip(merges, ranks)) does.
    merge_of_[pair_key(left, right)] = Merge{static_cast<int>(rank), it->second};
  }
}

int Bpe::find(std::string_view bytes) const {
  const auto it = id_of_.find(std::string(bytes));
  return it == id_of_.end() ? -1 : it->second;
}

const Bpe::Merge* Bpe::merge_of(int left, int right) const {
  const auto it = merge_of_.find(pair_key(left, right));
  return it == merge_of_.end() ? nullptr : &it->second;
}

// The symbols of the piece as a linked list; a heap of (rank, position) of the adjacent pairs
// that have a merge. Popping in that order applies the lowest rank first and its occurrences
// left to right; an entry whose pair has changed since it was pushed is stale and skipped.
// O(n log n) in the piece length (a long run of binary bytes is one piece).
void Bpe::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (ignore_merges_)
    if (const int whole = find(piece); whole >= 0) return out.push_back(static_cast<TokenId>(whole));
  const int n = static_cast<int>(piece.size());
  std::vector<int> id(n), next(n), prev(n);  // (n) each; next n / prev -1: none
  for (int i = 0; i < n; ++i)
    id[i] = byte_token_[static_cast<unsigned char>(piece[i])], next[i] = i + 1, prev[i] = i - 1;
  using Entry = std::pair<int, int>;  // (rank, position)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] >= n) return;
    if (const Merge* m = merge_of(id[i], id[next[i]])) heap.emplace(m->rank, i);
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    if (id[i] < 0 || next[i] >= n) continue;  // absorbed into its left neighbour, or now last
    const Merge* m = merge_of(id[i], id[next[i]]);
    if (!m || m->rank != rank) continue;  // stale
    const int j = next[i];
    id[i] = m->merged, id[j] = -1;
    next[i] = next[j];
    if (next[i] < n) prev[next[i]] = i;
    push(prev[i]);
    push(i);
  }
  for (int i = 0; i < n; i = next[i]) out.push_back(static_cast<TokenId>(id[i]));
}

std::vector<TokenId> Bpe::encode(std::string_view text, size_t begin, size_t end, const Pretokenizer& pieces) const {
  std::vector<TokenId> out;
  out.reserve((end - begin) / 3);
  std::unordered_map<std::string_view, std::vector<TokenId>> cache;  // views into text
  pieces.split(text, begin, end, [&](std::string_view piece, bool) {
    auto it = cache.find(piece);
    if (it == cache.end()) {
      std::vector<TokenId> ids;
      encode_piece(piece, ids);
      it = cache.emplace(piece, std::move(ids)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  });
  return out;
}

std::string Bpe::decode(const TokenId* ids, size_t n) const {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] >= tokens_.size())
      throw std::out_of_range("token " + std::to_string(ids[i]) + " is not below the vocabulary size " +
                              std::to_string(tokens_.size()));
    text += tokens_[ids[i]];
  }
  return text;
}

const std::vector<unsigned char>& gpt2_byte_order() {
  static const std::vector<unsigned char> order = [] {
    std::vector<unsigned char> bytes;
    bool printable[256] = {};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    for (int b = 0; b < 256; ++b)
      if (printable[b]) bytes.push_back(static_cast<unsigned char>(b));
    for (int b = 0; b < 256; ++b)
      if (!printable[b]) bytes.push_back(static_cast<unsigned char>(b));
    return bytes;
  }();
  return order;
}

}  // namespace trident::data
