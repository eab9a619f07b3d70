// Ranges of elements of a rank's flat parameter (and gradient) buffer (llm.c order, model/params.hpp):
// what a data-parallel replica owns under ZeRO — its part of every gradient bucket, which need
// not be one contiguous range of the buffer — and the order its optimizer state is stored in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace trident::model {

struct FlatRange {
  int64_t begin = 0, end = 0;  // [begin, end) of the flat buffer
  int64_t count() const { return end - begin; }
};

// Ascending and disjoint (normalized() makes them so). State kept for the ranges holds their
// elements one range after the other, in this order.
using FlatRanges = std::vector<FlatRange>;

inline int64_t total_count(const FlatRanges& ranges) {
  int64_t n = 0;
  for (const FlatRange& r : ranges) n += r.count();
  return n;
}

// Sorted by begin, empty ones dropped, touching or overlapping ones merged.
inline FlatRanges normalized(FlatRanges ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const FlatRange& a, const FlatRange& b) { return a.begin < b.begin; });
  FlatRanges out;
  for (const FlatRange& r : ranges) {
    if (r.count() <= 0) continue;
    if (!out.empty() && r.begin <= out.back().end) out.back().end = std::max(out.back().end, r.end);
    else out.push_back(r);
  }
  return out;
}

}  // namespace trident::model
