// Bytes this rank sends, per kind of group (tensor, pipeline, data, embedding), per step: every
// transfer of a comm::Communicator made for that kind of group counts here (and per level in
// the communicator itself).
#pragma once

#include <cstddef>

namespace trident::comm {

enum class Traffic { Tensor = 0, Pipeline, Data, Embedding, Context, Count };
const char* traffic_name(Traffic group);  // "tensor", "pipeline", "data", "embedding", "context"

void count_sent(Traffic group, double bytes);

struct TrafficTotals {
  double bytes[static_cast<int>(Traffic::Count)] = {};
};
TrafficTotals take_traffic();  // since the last call, then reset

}  // namespace trident::comm
