// The time of each kernel operation (`trident bench DECK --ops`): a Context whose op_times is set
// has every kernels::* call bracketed by its backend's marks — the host clock on the CPU (whose
// operations finish inside the call), events on CUDA — and totals() turns them into seconds per
// operation. Off (null) in every run but the benchmark's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace trident::kernels {

class OpTimes {
 public:
  struct Total {
    int64_t calls = 0;
    double seconds = 0;
  };
  // One call of `name`, from mark `from` to mark `to` of `backend`.
  void record(const char* name, Backend& backend, Backend::Mark from, Backend::Mark to);
  // The calls recorded since the last totals(), summed per operation (waits for the device, and
  // releases the marks).
  std::map<std::string, Total> totals();

 private:
  struct Call {
    const char* name;
    Backend* backend;
    Backend::Mark from, to;
  };
  std::vector<Call> calls_;
};

}  // namespace trident::kernels
