// What every communicator shares: the balanced split of a buffer.
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

}  // namespace trident::comm
