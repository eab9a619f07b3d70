// What every communicator shares: the balanced split of a buffer, and a ring step as a receive
// and a send.
#include "comm/communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace trident::comm {

Work Communicator::send_recv(const void* out, void* in, size_t count, DType dtype, int to, int from, int tag,
                             Stream stream) {
  std::vector<Work> both;
  both.push_back(recv(in, count, dtype, from, tag, stream));
  both.push_back(send(out, count, dtype, to, tag, stream));
  return all_of(std::move(both));
}

std::pair<size_t, size_t> segment_of(size_t n, int parts, int k) {
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = k * base + std::min<size_t>(k, extra);
  return {begin, begin + base + (static_cast<size_t>(k) < extra ? 1 : 0)};
}

}  // namespace trident::comm
