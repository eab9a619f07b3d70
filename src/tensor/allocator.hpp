// Where tracked buffers get their memory. An Allocator hands out zeroed, 64-byte aligned memory
// of a MemoryKind on its device; tensor/buffer.hpp counts it by memory category around the
// call. The host allocator is the process's ordinary memory; each kernel backend
// (kernels/backend.hpp) is the Allocator of its device.
#pragma once

#include <cstddef>

#include "tensor/device.hpp"

namespace trident {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // bytes (> 0) of zeroed memory of this kind, 64-byte aligned; nullptr when it is not there.
  virtual void* allocate(size_t bytes, MemoryKind kind) = 0;
  virtual void release(void* pointer, size_t bytes, MemoryKind kind) = 0;
};

// Host memory for every kind (posix_memalign, zeroed): what buffers without a device use, and
// what the CPU backend hands out.
Allocator& host_allocator();

}  // namespace trident
