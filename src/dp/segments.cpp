// Planning the gradient buckets.
#include "dp/segments.hpp"

#include <algorithm>

namespace trident::dp {

std::vector<Bucket> plan_buckets(const std::vector<GradientSegment>& segments, double bucket_mb) {
  const int64_t target = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * 1048576.0 / sizeof(float)));
  std::vector<Bucket> buckets;
  Bucket current;
  auto close = [&] {  // ready once its last segment is: the events descend
    current.ready_event = current.segments.back().ready_event;
    buckets.push_back(std::move(current));
    current = Bucket{};
  };
  for (size_t k = 0; k < segments.size(); ++k) {
    if (segments[k].tied) {
      if (!current.segments.empty()) close();
      current.segments.push_back(segments[k]);
      current.elements = segments[k].count;
      close();
      continue;
    }
    current.segments.push_back(segments[k]);
    current.elements += segments[k].count;
    const int event = segments[k].ready_event;
    const bool event_ends = k + 1 == segments.size() || segments[k + 1].ready_event != event;
    if (!event_ends) continue;
    if (current.elements >= target || k + 1 == segments.size()) close();
  }
  return buckets;
}

std::vector<Bucket> plan_block_buckets(const std::vector<GradientSegment>& segments, double bucket_mb) {
  const int64_t target = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * 1048576.0 / sizeof(float)));
  std::vector<GradientSegment> blocks;
  for (const GradientSegment& s : segments)
    if (s.ready_event >= 0) blocks.push_back(s);
  std::vector<Bucket> buckets = plan_buckets(blocks, 0.0);  // a bucket per event
  Bucket rest;
  rest.ready_event = -1;
  auto close = [&] {
    buckets.push_back(std::move(rest));
    rest = Bucket{};
    rest.ready_event = -1;
  };
  for (const GradientSegment& s : segments) {
    if (s.ready_event >= 0) continue;
    if (s.tied && rest.elements > 0) close();
    for (int64_t at = 0; at < s.count;) {  // pieces up to the bucket's end
      const int64_t n = std::min(s.count - at, target - rest.elements);
      GradientSegment piece = s;
      piece.offset = s.offset + at;
      piece.count = n;
      if (s.data) piece.data = static_cast<char*>(s.data) + at * static_cast<int64_t>(dtype_size(s.dtype));
      rest.segments.push_back(piece);
      rest.elements += n;
      at += n;
      if (rest.elements == target) close();
    }
    if (s.tied && rest.elements > 0) close();
  }
  if (rest.elements > 0) buckets.push_back(std::move(rest));
  return buckets;
}

std::vector<int> block_buckets(const std::vector<Bucket>& buckets) {
  std::vector<int> of_block;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int event = buckets[b].ready_event;
    if (event < 0) continue;
    if (of_block.size() <= static_cast<size_t>(event)) of_block.resize(static_cast<size_t>(event) + 1, -1);
    of_block[static_cast<size_t>(event)] = static_cast<int>(b);
  }
  return of_block;
}

int64_t shard_part(const Bucket& bucket, int size) { return shard_part(bucket.elements, size); }
int64_t shard_part(int64_t elements, int size) { return (elements + size - 1) / size; }

model::FlatRanges owned_ranges(const std::vector<Bucket>& buckets, int rank, int size) {
  model::FlatRanges ranges;
  for (const Bucket& bucket : buckets) {
    const int64_t part = shard_part(bucket, size);
    const int64_t own_begin = rank * part, own_end = std::min(own_begin + part, bucket.elements);
    int64_t at = 0;  // the segment's first element in the packed bucket
    for (const GradientSegment& s : bucket.segments) {
      const int64_t lo = std::max(at, own_begin), hi = std::min(at + s.count, own_end);
      if (lo < hi) ranges.push_back({s.offset + (lo - at), s.offset + (hi - at)});
      at += s.count;
    }
  }
  return model::normalized(std::move(ranges));
}

// Where each piece lies in the owned ranges' order: the ranges are ascending, so a binary search
// of their running sums.
std::vector<std::vector<OwnPiece>> own_pieces(const std::vector<Bucket>& buckets, int rank, int size) {
  const model::FlatRanges owned = owned_ranges(buckets, rank, size);
  std::vector<int64_t> state_at(owned.size() + 1, 0);
  for (size_t k = 0; k < owned.size(); ++k) state_at[k + 1] = state_at[k] + owned[k].count();
  auto state_of = [&](int64_t flat) {
    const auto after = std::upper_bound(owned.begin(), owned.end(), flat,
                                        [](int64_t x, const model::FlatRange& r) { return x < r.begin; });
    const size_t k = static_cast<size_t>(after - owned.begin()) - 1;
    return state_at[k] + (flat - owned[k].begin);
  };
  std::vector<std::vector<OwnPiece>> all;
  for (const Bucket& bucket : buckets) {
    const int64_t part = shard_part(bucket, size), own_begin = rank * part, own_end = own_begin + part;
    std::vector<OwnPiece> pieces;
    int64_t at = 0;
    for (const GradientSegment& s : bucket.segments) {
      const int64_t lo = std::max(at, own_begin), hi = std::min(at + s.count, own_end);
      const int64_t flat = s.offset + (lo - at);
      void* memory = s.data ? static_cast<char*>(s.data) + (lo - at) * static_cast<int64_t>(dtype_size(s.dtype)) : nullptr;
      if (lo < hi) pieces.push_back({lo, hi - lo, memory, flat, state_of(flat)});
      at += s.count;
    }
    all.push_back(std::move(pieces));
  }
  return all;
}

}  // namespace trident::dp
