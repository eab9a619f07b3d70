// Tensor: a view of typed memory — pointer, element type, shape and device — owning nothing.
// What the kernel backends' memory operations take (kernels/ops.inc), so that the element type
// travels with the pointer instead of being a separate precision argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tensor/device.hpp"

namespace trident {

// Up to four dimensions, row-major; rank 0 is an empty shape (no elements).
struct Shape {
  static constexpr int kMaxRank = 4;
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  Shape() = default;
  Shape(std::initializer_list<int64_t> sizes) {
    if (sizes.size() > kMaxRank) throw std::logic_error("Shape: more than 4 dimensions");
    for (int64_t size : sizes) dims[rank++] = size;
  }
  int64_t numel() const {
    if (rank == 0) return 0;
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
  }
};

// The DType of a C++ element type. The 16-bit types are both uint16_t in host code, so they
// have none here: a view of 16-bit values names its dtype.
template <class T>
constexpr DType dtype_of() {
  using U = std::remove_const_t<T>;
  static_assert(std::is_same_v<U, float> || std::is_same_v<U, double> || std::is_same_v<U, int32_t>,
                "dtype_of: bf16 and fp16 values are uint16_t; name their DType");
  if constexpr (std::is_same_v<U, float>) return DType::f32;
  else if constexpr (std::is_same_v<U, double>) return DType::f64;
  else return DType::i32;
}

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Device device;

  size_t numel() const { return static_cast<size_t>(shape.numel()); }
  size_t bytes() const { return numel() * dtype_size(dtype); }
  // The elements as T, which must be the dtype's host type (uint16_t for bf16 and fp16): a
  // mismatch is a programming error and throws.
  template <class T>
  T* as() const {
    if (!holds<T>())
      throw std::logic_error(std::string("Tensor of ") + dtype_name(dtype) + " read as another type");
    return static_cast<T*>(data);
  }
  // The same memory as `to`, which must have as many elements (a mismatch is a programming error
  // and throws): a flat buffer seen with the shape a kernel reads its sizes from.
  Tensor reshaped(Shape to) const {
    if (to.numel() != shape.numel())
      throw std::logic_error("Tensor of " + std::to_string(shape.numel()) + " elements reshaped to " +
                             std::to_string(to.numel()));
    return Tensor{data, dtype, to, device};
  }
  // Elements [first, first + count) of the flat memory, as a vector of count (out of range is a
  // programming error and throws): a chunk of rows of a row-major matrix is first = row · width.
  Tensor elements(int64_t first, int64_t count) const {
    if (first < 0 || count < 0 || first + count > shape.numel())
      throw std::logic_error("Tensor of " + std::to_string(shape.numel()) + " elements: no elements [" +
                             std::to_string(first) + ", " + std::to_string(first + count) + ")");
    if (data == nullptr) return Tensor{nullptr, dtype, Shape{count}, device};  // an absent buffer's part: absent
    return Tensor{static_cast<char*>(data) + first * static_cast<int64_t>(dtype_size(dtype)), dtype, Shape{count},
                  device};
  }
  template <class T>
  bool holds() const {
    if constexpr (std::is_same_v<std::remove_const_t<T>, uint16_t>)
      return dtype == DType::bf16 || dtype == DType::fp16;
    else
      return dtype == dtype_of<T>();
  }
};

// A view of n values (or of `shape`) at data; a view of 16-bit values names its dtype.
template <class T>
Tensor view(const T* data, Shape shape, Device device = {}) {
  return Tensor{const_cast<T*>(data), dtype_of<T>(), shape, device};
}
template <class T>
Tensor view(const T* data, size_t n, Device device = {}) {
  return view(data, Shape{static_cast<int64_t>(n)}, device);
}
inline Tensor view(const void* data, DType dtype, size_t n, Device device = {}) {
  return Tensor{const_cast<void*>(data), dtype, Shape{static_cast<int64_t>(n)}, device};
}

}  // namespace trident
