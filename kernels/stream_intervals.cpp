// Intervals on a stream's clock, read together.
#include "kernels/stream_intervals.hpp"

#include <stdexcept>

namespace trident::kernels {

StreamIntervals::~StreamIntervals() {
  try {
    if (open_) end();
    take_seconds();
  } catch (...) {  // a device gone wrong is reported where it is used, not from a destructor
  }
}

void StreamIntervals::begin() {
  if (open_) throw std::logic_error("StreamIntervals: an interval begun inside another");
  opened_ = backend_->mark(stream_);
  open_ = true;
}

void StreamIntervals::end() {
  if (!open_) throw std::logic_error("StreamIntervals: an interval ended that was not begun");
  closed_.emplace_back(opened_, backend_->mark(stream_));
  open_ = false;
}

double StreamIntervals::take_seconds() {
  double seconds = 0;
  for (auto& [from, to] : closed_) seconds += backend_->seconds_between(from, to);
  closed_.clear();
  return seconds;
}

}  // namespace trident::kernels
