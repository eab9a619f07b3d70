// The gradient buckets of the data-parallel reduction: which slices of the flat gradient
// buffer each holds, and after which backward event they are all final. Pure arithmetic (no
// MPI), shared by the reducer and the memory model (src/plan/), whose communication bytes are
// the largest bucket.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.hpp"
#include "model/params.hpp"

namespace trident::comm {

struct Segment {
  int64_t offset, count;  // in the flat gradient buffer
};

struct Bucket {
  std::vector<Segment> segments;
  int64_t elements = 0;
  int ready_event = 0;  // the on_final(layer) after which every segment is final
};

// Slices in the order backward finishes them (the stage's blocks from the last, then the
// embeddings: event −1); a bucket closes at the end of an event once it holds bucket_mb MiB
// (the last one takes what is left).
std::vector<Bucket> plan_buckets(const model::GptConfig& config, const model::Partition& slice, double bucket_mb);

}  // namespace trident::comm
