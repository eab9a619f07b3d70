// The CPU kernels' workspaces: buffers kept between calls, as large as the largest need so far,
// tracked as Workspace — what the memory model counts for the CPU's kernels (plan/memory_model.cpp).
// Each kernel's workspace is a static buffer of its own: the kernels run on the calling thread,
// one call at a time (the model's thread; their OpenMP threads share the call's buffers).
#pragma once

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

}  // namespace trident::kernels::cpu
