// Bytes this rank sends, per kind of group (tensor, pipeline, data, embedding), per step. Our
// own collectives report what they actually sent (comm::Communicator counts every transfer, per
// level too); a collective still done by MPI counts as its ring equivalent, 2(n−1)/n · S.
#pragma once

#include <cstddef>

namespace trident::comm {

enum class Traffic { Tensor = 0, Pipeline, Data, Embedding, Count };
const char* traffic_name(Traffic group);  // "tensor", "pipeline", "data", "embedding"

void count_sent(Traffic group, double bytes);
void count_all_reduce(Traffic group, size_t payload_bytes, int ranks);  // its ring equivalent

struct TrafficTotals {
  double bytes[static_cast<int>(Traffic::Count)] = {};
};
TrafficTotals take_traffic();  // since the last call, then reset

}  // namespace trident::comm
