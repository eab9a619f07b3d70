// The gradients the data-parallel layer reduces, as the model hands them over: a list of
// segments of gradient memory, each with its element type, a name for messages, and the
// backward event after which it is final — nothing of the model's structure beyond that.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/flat_ranges.hpp"
#include "tensor/device.hpp"

namespace trident::dp {

struct GradientSegment {
  std::string name;       // "blocks.qkvw[3]": the tensor and layer it holds
  void* data = nullptr;   // (count) gradients; null where only the sizes matter (planning)
  int64_t offset = 0;     // its first element's place in the flat gradient buffer
  int64_t count = 0;
  DType dtype = DType::f32;
  int ready_event = -1;   // final after backward reports this event (a block's index; -1: the end)
  // A copy of the tied embedding (wte on the first or the last of several stages): a bucket of
  // its own, packed alike on both stages, so that with ZeRO replica r of either owns the same
  // elements of it (GradientReducer::sum_tied; Megatron-Core's shared_embedding bucket).
  bool tied = false;
};

struct Bucket {
  std::vector<GradientSegment> segments;
  int64_t elements = 0;
  int ready_event = 0;  // the event after which every segment is final
};

// Segments in the order backward finishes them, grouped by ready_event (events descending,
// -1 last); a bucket closes at the end of an event once it holds bucket_mb MiB of f32 (the last
// one takes what is left). A tied segment is a bucket alone.
std::vector<Bucket> plan_buckets(const std::vector<GradientSegment>& in_backward_order, double bucket_mb);

// ZeRO-2's and 3's buckets: one per block (the segments of each event ≥ 0), then the rest (event
// −1: the embeddings, final norm and head, in order) cut every bucket_mb MiB of f32 — through
// segments where they are longer — so that no packing or gathering buffer is embedding-sized; a
// tied segment begins a bucket and its last piece ends one.
std::vector<Bucket> plan_block_buckets(const std::vector<GradientSegment>& in_backward_order, double bucket_mb);

// Per block (event l ≥ 0), the index of the bucket its segments make (-1 for an event without
// one): what plan_block_buckets' block buckets are looked up by.
std::vector<int> block_buckets(const std::vector<Bucket>& buckets);

// ZeRO's sharding of a bucket over `size` replicas (Megatron-Core's distributed optimizer): the
// bucket's elements, packed in segment order, padded to size·part with part = ⌈elements/size⌉,
// so that one reduce-scatter leaves replica r the sums of packed [r·part, (r+1)·part).
int64_t shard_part(const Bucket& bucket, int size);
int64_t shard_part(int64_t elements, int size);  // a bucket of `elements`
// The flat-buffer ranges replica `rank` owns over all the buckets: the union over the buckets of
// their packed [rank·part, min((rank+1)·part, elements)), normalized. The replicas' ranges
// partition the buffer.
model::FlatRanges owned_ranges(const std::vector<Bucket>& buckets, int rank, int size);

// A piece of replica `rank`'s part of a bucket: packed [packed, packed + count), the memory of its
// segment there (the segment's data, `count` elements of its dtype), its place in the flat
// layout, and in the owned ranges' order (the state's: owned_ranges(buckets, rank, size)).
struct OwnPiece {
  int64_t packed = 0, count = 0;
  void* memory = nullptr;
  int64_t flat = 0, state = 0;
};
// Per bucket, replica `rank`'s pieces (the segments are cut where its part begins and ends).
std::vector<std::vector<OwnPiece>> own_pieces(const std::vector<Bucket>& buckets, int rank, int size);

}  // namespace trident::dp
