// Host buffers: 64-byte aligned, zero-initialised, move-only, and tracked by memory category so
// that current and peak bytes per category can be reported (and compared with the planner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace trident {

enum class MemoryCategory { Parameters, Gradients, OptimizerState, Activations, Communication,
                            Workspace, Checkpoint /* asynchronous checkpoint staging */, Count };
const char* memory_category_name(MemoryCategory category);

struct MemoryUsage {
  int64_t current[static_cast<int>(MemoryCategory::Count)] = {};
  int64_t peak[static_cast<int>(MemoryCategory::Count)] = {};
  int64_t total_current() const;
  int64_t total_peak = 0;
};
MemoryUsage memory_usage();  // this process

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(size_t count, MemoryCategory category);
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

 private:
  void release();
  T* data_ = nullptr;
  size_t count_ = 0;
  MemoryCategory category_ = MemoryCategory::Workspace;
};

// Untyped allocation with accounting, used by Buffer<T>.
void* tracked_alloc(size_t bytes, MemoryCategory category);
// What tracked_alloc throws when the memory is not there: a std::bad_alloc whose what() names
// the size, the category and what this rank holds already.
class OutOfMemory : public std::bad_alloc {
 public:
  OutOfMemory(size_t bytes, MemoryCategory category);
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};
void tracked_free(void* pointer, size_t bytes, MemoryCategory category);
// Memory allocated by someone else on our behalf (an MPI shared window): +bytes when it is
// allocated, -bytes when it is freed, so that it counts like a Buffer of that category.
void tracked_external(int64_t bytes, MemoryCategory category);

template <class T>
Buffer<T>::Buffer(size_t count, MemoryCategory category)
    : data_(static_cast<T*>(tracked_alloc(count * sizeof(T), category))),
      count_(count),
      category_(category) {}

template <class T>
Buffer<T>::~Buffer() {
  release();
}

template <class T>
Buffer<T>::Buffer(Buffer&& other) noexcept
    : data_(other.data_), count_(other.count_), category_(other.category_) {
  other.data_ = nullptr;
  other.count_ = 0;
}

template <class T>
Buffer<T>& Buffer<T>::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_, count_ = other.count_, category_ = other.category_;
    other.data_ = nullptr;
    other.count_ = 0;
  }
  return *this;
}

template <class T>
void Buffer<T>::release() {
  if (data_) tracked_free(data_, count_ * sizeof(T), category_);
  data_ = nullptr;
  count_ = 0;
}

}  // namespace trident
