// What every communicator shares: the balanced split of a buffer, and strings over the interface.
#include "comm/communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace trident::comm {

std::pair<size_t, size_t> segment_of(size_t n, int parts, int k) {
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = k * base + std::min<size_t>(k, extra);
  return {begin, begin + base + (static_cast<size_t>(k) < extra ? 1 : 0)};
}

void broadcast_string(Communicator& group, std::string& text, int root) {
  int32_t length = static_cast<int32_t>(text.size());
  group.broadcast(&length, 1, DType::i32, root, Stream{}).wait();
  std::vector<int32_t> words((static_cast<size_t>(length) + 3) / 4, 0);  // the bytes, 4 to a word
  // An empty text has no words: memcpy's pointers must not be null even for 0 bytes (UBSan).
  if (group.rank() == root && !text.empty()) std::memcpy(words.data(), text.data(), text.size());
  group.broadcast(words.data(), words.size(), DType::i32, root, Stream{}).wait();
  text.assign(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(length));
}

}  // namespace trident::comm
