// Per-operation timing.
#include "kernels/op_times.hpp"

namespace trident::kernels {

void OpTimes::record(const char* name, Backend& backend, Backend::Mark from, Backend::Mark to) {
  calls_.push_back({name, &backend, from, to});
}

std::map<std::string, OpTimes::Total> OpTimes::totals() {
  std::map<std::string, Total> totals;
  for (const Call& call : calls_) {
    Total& total = totals[call.name];
    ++total.calls;
    total.seconds += call.backend->seconds_between(call.from, call.to);
  }
  calls_.clear();
  return totals;
}

}  // namespace trident::kernels
