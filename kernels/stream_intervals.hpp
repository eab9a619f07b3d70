// Intervals of a stream's work timed on the stream's own clock (Backend::mark) and read together
// later — at the end of a step, when the stream has done them — so that timing a pass costs the
// host no wait. On a GPU the host's clock around a pass measures only its launches; the marks
// measure the pass. On the host's streams (the CPU, the guard) a mark is the host clock at the
// call, so the intervals are what the host clock says, as before.
#pragma once

#include <utility>
#include <vector>

#include "kernels/backend.hpp"

namespace trident::kernels {

class StreamIntervals {
 public:
  // The stream of `ctx` on its backend.
  explicit StreamIntervals(const Context& ctx) : backend_(&backend_of(ctx)), stream_(ctx.stream) {}
  ~StreamIntervals();  // releases the marks
  StreamIntervals(const StreamIntervals&) = delete;
  StreamIntervals& operator=(const StreamIntervals&) = delete;

  void begin();  // an interval opens where the stream is now (after what is enqueued on it)
  void end();    // and closes there
  // The seconds of the intervals closed since the last call, summed; waits until the last of
  // them has been reached. An interval still open stays open.
  double take_seconds();

 private:
  Backend* backend_;
  Stream stream_;
  std::vector<std::pair<Backend::Mark, Backend::Mark>> closed_;
  Backend::Mark opened_;
  bool open_ = false;
};

}  // namespace trident::kernels
