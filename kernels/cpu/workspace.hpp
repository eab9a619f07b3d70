// The CPU kernels' workspaces: buffers kept between calls, as large as the largest need so far,
// tracked as Workspace — what the memory model counts for the CPU's kernels (plan/memory_model.cpp).
// Each kernel's workspace is a static buffer of its own: the kernels run on the calling thread,
// one call at a time (the model's thread; their OpenMP threads share the call's buffers, or take
// a part each: per_thread).
#pragma once

#include <omp.h>

#include <cstddef>

#include "tensor/buffer.hpp"

namespace trident::kernels::cpu {

// At least `floats` floats of `workspace`: grown where a call needs more, freed first, so that its
// peak is the largest need, not two.
inline float* at_least(Buffer<float>& workspace, size_t floats) {
  if (workspace.size() < floats) {
    workspace = Buffer<float>();
    workspace = Buffer<float>(floats, MemoryCategory::Workspace);
  }
  return workspace.data();
}

// `floats` floats of `workspace` for each thread of the parallel region the caller opens next
// (whose team has at most omp_get_max_threads() threads); inside it, mine() is the calling
// thread's part. Allocated here, before the region, so that no thread allocates inside it.
struct PerThread {
  float* first;
  size_t floats;
  float* mine() const { return first + static_cast<size_t>(omp_get_thread_num()) * floats; }
};
inline PerThread per_thread(Buffer<float>& workspace, size_t floats) {
  return {at_least(workspace, floats * static_cast<size_t>(omp_get_max_threads())), floats};
}

}  // namespace trident::kernels::cpu
