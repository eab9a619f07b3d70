// Per-operation timing.
#include "kernels/op_times.hpp"

#include <utility>

namespace trident::kernels {

void OpTimes::record(const char* name, Backend& backend, Backend::Mark from, Backend::Mark to) {
  calls_.push_back({name, &backend, from, to});
}

// The calls taken before their marks are read, each pair released once (StreamIntervals').
std::map<std::string, OpTimes::Total> OpTimes::totals() {
  const std::vector<Call> calls = std::exchange(calls_, {});
  std::map<std::string, Total> totals;
  for (const Call& call : calls) {
    Total& total = totals[call.name];
    ++total.calls;
    total.seconds += call.backend->seconds_between(call.from, call.to);
  }
  return totals;
}

}  // namespace trident::kernels
