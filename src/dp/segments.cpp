// Planning the gradient buckets.
#include "dp/segments.hpp"

#include <algorithm>

namespace trident::dp {

std::vector<Bucket> plan_buckets(const std::vector<GradientSegment>& segments, double bucket_mb) {
  const int64_t target = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * 1048576.0 / sizeof(float)));
  std::vector<Bucket> buckets;
  Bucket current;
  for (size_t k = 0; k < segments.size(); ++k) {
    current.segments.push_back(segments[k]);
    current.elements += segments[k].count;
    const int event = segments[k].ready_event;
    const bool event_ends = k + 1 == segments.size() || segments[k + 1].ready_event != event;
    if (!event_ends) continue;
    current.ready_event = event;
    if (current.elements >= target || k + 1 == segments.size()) {
      buckets.push_back(std::move(current));
      current = Bucket{};
    }
  }
  return buckets;
}

}  // namespace trident::dp
