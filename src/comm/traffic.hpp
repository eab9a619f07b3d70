// Bytes this rank sends, per kind of group, counted where the communication is issued. For a
// collective the count is what its ring algorithm sends from each rank — all-reduce 2(n−1)/n·S,
// reduce-scatter and all-gather (n−1)/n·S for S bytes of payload — and for point-to-point the
// message itself. (The hierarchy issue replaces the collectives with our own algorithms and
// counts their actual bytes per level.)
#pragma once

#include <cstddef>

namespace trident::comm {

enum class Traffic { Tensor = 0, Pipeline, Data, Embedding, Count };
const char* traffic_name(Traffic group);  // "tensor", "pipeline", "data", "embedding"

void count_sent(Traffic group, double bytes);
void count_all_reduce(Traffic group, size_t payload_bytes, int ranks);
void count_scatter_or_gather(Traffic group, size_t payload_bytes, int ranks);

struct TrafficTotals {
  double bytes[static_cast<int>(Traffic::Count)] = {};
};
TrafficTotals take_traffic();  // since the last call, then reset

}  // namespace trident::comm
