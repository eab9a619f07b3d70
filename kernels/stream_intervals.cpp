// Intervals on a stream's clock, read together.
#include "kernels/stream_intervals.hpp"

#include <stdexcept>
#include <utility>

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

// The list taken before its marks are read: seconds_between releases a pair's marks even when
// the read fails and throws, and a pair left in the list would be released again (destructor).
double StreamIntervals::take_seconds() {
  const auto closed = std::exchange(closed_, {});
  double seconds = 0;
  for (const auto& [from, to] : closed) seconds += backend_->seconds_between(from, to);
  return seconds;
}

}  // namespace trident::kernels
