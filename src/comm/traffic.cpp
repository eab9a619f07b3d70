// Per-group byte counters (atomic: the reducer's communication thread counts too).
#include "comm/traffic.hpp"

#include <atomic>

namespace trident::comm {
namespace {

std::atomic<double> g_bytes[static_cast<int>(Traffic::Count)];

void add(std::atomic<double>& counter, double value) {
  double seen = counter.load();
  while (!counter.compare_exchange_weak(seen, seen + value)) {
  }
}

}  // namespace

const char* traffic_name(Traffic group) {
  switch (group) {
    case Traffic::Tensor: return "tensor";
    case Traffic::Pipeline: return "pipeline";
    case Traffic::Data: return "data";
    case Traffic::Embedding: return "embedding";
    case Traffic::Context: return "context";
    case Traffic::Count: break;
  }
  return "?";
}

void count_sent(Traffic group, double bytes) { add(g_bytes[static_cast<int>(group)], bytes); }

TrafficTotals take_traffic() {
  TrafficTotals totals;
  for (int g = 0; g < static_cast<int>(Traffic::Count); ++g) totals.bytes[g] = g_bytes[g].exchange(0.0);
  return totals;
}

}  // namespace trident::comm
