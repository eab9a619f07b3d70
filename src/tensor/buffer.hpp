// Buffers: 64-byte aligned, zero-initialised, move-only, allocated through an Allocator (the
// host's, or a kernel backend's for its device) and tracked by memory category so that current
// and peak bytes per category can be reported (and compared with the planner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "tensor/allocator.hpp"
#include "tensor/tensor.hpp"

namespace trident {

enum class MemoryCategory { Parameters, Gradients, OptimizerState, Activations, Communication,
                            Workspace, Checkpoint /* asynchronous checkpoint staging */, Count };
const char* memory_category_name(MemoryCategory category);

// A device allocator's granularity: the CUDA driver maps device memory in pages of 2 MiB
// (cuMemGetAllocationGranularity's minimum on NVIDIA's data-center GPUs), and each of our buffers
// is one cudaMalloc (kernels/cuda/backend.cu), so on a GPU a buffer takes its bytes rounded up
// to it. Tracked on every backend, so that a CPU run says what the same buffers take on a GPU.
constexpr int64_t kDeviceGranularityBytes = int64_t(2) << 20;

struct MemoryUsage {
  int64_t current[static_cast<int>(MemoryCategory::Count)] = {};
  int64_t peak[static_cast<int>(MemoryCategory::Count)] = {};
  int64_t total_current() const;
  // Of total_current, the buffers in device memory (MemoryKind::device): what a GPU's used memory
  // holds of ours (host and pinned buffers are the host's).
  int64_t device_current = 0;
  int64_t total_peak = 0;
  int64_t buffers_peak = 0;   // the most tracked buffers alive at once
  int64_t granular_peak = 0;  // the peak of their bytes each rounded up to kDeviceGranularityBytes
};
MemoryUsage memory_usage();  // this process

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(size_t count, MemoryCategory category, Allocator& allocator = host_allocator(),
         MemoryKind kind = MemoryKind::host);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  // The whole buffer as a 1-D tensor of T's dtype (not for 16-bit values: TensorBuffer).
  Tensor view() const { return trident::view(data_, count_, device()); }
  // The same as `shape` (of size() elements).
  Tensor view(Shape shape) const { return view().reshaped(shape); }
  Device device() const { return allocator_ ? allocator_->device() : Device{}; }

 private:
  void release();
  T* data_ = nullptr;
  size_t count_ = 0;
  MemoryCategory category_ = MemoryCategory::Workspace;
  Allocator* allocator_ = nullptr;
  MemoryKind kind_ = MemoryKind::host;
};

// A buffer whose element type is chosen at run time (an activation kept in f32, bf16 or fp16):
// the bytes of numel(shape) values of dtype, as one tracked allocation.
class TensorBuffer {
 public:
  TensorBuffer() = default;
  TensorBuffer(DType dtype, Shape shape, MemoryCategory category, Allocator& allocator = host_allocator(),
               MemoryKind kind = MemoryKind::host)
      : bytes_(static_cast<size_t>(shape.numel()) * dtype_size(dtype), category, allocator, kind),
        dtype_(dtype),
        shape_(shape) {}
  Tensor view() const { return Tensor{const_cast<unsigned char*>(bytes_.data()), dtype_, shape_, bytes_.device()}; }
  Tensor view(Shape shape) const { return view().reshaped(shape); }  // of size() elements
  template <class T>
  T* data() const { return view().as<T>(); }
  DType dtype() const { return dtype_; }
  size_t size() const { return static_cast<size_t>(shape_.numel()); }

 private:
  Buffer<unsigned char> bytes_;
  DType dtype_ = DType::f32;
  Shape shape_;
};

// Untyped allocation through `allocator` with accounting, used by Buffer<T>.
void* tracked_alloc(size_t bytes, MemoryCategory category, Allocator& allocator = host_allocator(),
                    MemoryKind kind = MemoryKind::host);
// What tracked_alloc throws when the memory is not there: a std::bad_alloc whose what() names
// the size, the category and what this rank holds already.
class OutOfMemory : public std::bad_alloc {
 public:
  OutOfMemory(size_t bytes, MemoryCategory category);
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};
void tracked_free(void* pointer, size_t bytes, MemoryCategory category, Allocator& allocator = host_allocator(),
                  MemoryKind kind = MemoryKind::host);
// Memory allocated by someone else on our behalf (an MPI shared window): +bytes when it is
// allocated, -bytes when it is freed, so that it counts like a Buffer of that category.
void tracked_external(int64_t bytes, MemoryCategory category);

template <class T>
Buffer<T>::Buffer(size_t count, MemoryCategory category, Allocator& allocator, MemoryKind kind)
    : data_(static_cast<T*>(tracked_alloc(count * sizeof(T), category, allocator, kind))),
      count_(count),
      category_(category),
      allocator_(&allocator),
      kind_(kind) {}

template <class T>
Buffer<T>::~Buffer() {
  release();
}

template <class T>
Buffer<T>::Buffer(Buffer&& other) noexcept
    : data_(other.data_),
      count_(other.count_),
      category_(other.category_),
      allocator_(other.allocator_),
      kind_(other.kind_) {
  other.data_ = nullptr;
  other.count_ = 0;
}

template <class T>
Buffer<T>& Buffer<T>::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_, count_ = other.count_, category_ = other.category_;
    allocator_ = other.allocator_, kind_ = other.kind_;
    other.data_ = nullptr;
    other.count_ = 0;
  }
  return *this;
}

template <class T>
void Buffer<T>::release() {
  if (data_) tracked_free(data_, count_ * sizeof(T), category_, *allocator_, kind_);
  data_ = nullptr;
  count_ = 0;
}

}  // namespace trident
