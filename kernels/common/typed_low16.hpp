// The typed element-type operations of kernels/ops.inc (convert, store, round_to, narrow), written
// once over a backend's 16-bit operations on pointers: the checks of the tensors' types and sizes
// and the choice of operation are the same on every backend. Host code only.
#pragma once

#include <stdexcept>
#include <string>

#include "kernels/kernels.hpp"

namespace trident::kernels {

// A backend's pointer-level 16-bit operations (kernels/cpu/cpu.hpp, kernels/cuda/cuda.hpp).
struct Low16Ops {
  const char* backend;  // "cpu", "cuda": for the messages
  void (*copy)(Context&, const Tensor& dst, const Tensor& src);
  void (*to_low)(Context&, Precision, low16* out, const float* in, size_t n);
  void (*from_low)(Context&, Precision, float* out, const low16* in, size_t n);
  void (*store_low)(Context&, Precision, low16* kept, float* values, size_t n);
  void (*round_low)(Context&, Precision, float* values, size_t n);
  low16* (*narrow_in_place)(Context&, Precision, float* values, size_t n);
};

namespace typed_low16 {

inline void require(const Low16Ops& ops, bool condition, const char* what) {
  if (!condition) throw std::logic_error(std::string("kernels::") + ops.backend + ": " + what);
}

inline bool is_low16(DType dtype) { return dtype == DType::bf16 || dtype == DType::fp16; }

inline void convert(const Low16Ops& ops, Context& ctx, const Tensor& out, const Tensor& in) {
  require(ops, out.numel() == in.numel(), "convert between tensors of different sizes");
  if (out.dtype == in.dtype) return ops.copy(ctx, out, in);
  if (in.dtype == DType::f32 && is_low16(out.dtype))
    return ops.to_low(ctx, precision_of(out.dtype), out.as<low16>(), in.as<float>(), in.numel());
  if (is_low16(in.dtype) && out.dtype == DType::f32)
    return ops.from_low(ctx, precision_of(in.dtype), out.as<float>(), in.as<low16>(), in.numel());
  throw std::logic_error(std::string("kernels::") + ops.backend + ": no conversion from " + dtype_name(in.dtype) +
                         " to " + dtype_name(out.dtype));
}

inline void store(const Low16Ops& ops, Context& ctx, const Tensor& kept, const Tensor& values) {
  require(ops, kept.numel() == values.numel(), "store into a tensor of another size");
  if (kept.dtype == DType::f32) return ops.copy(ctx, kept, values);
  ops.store_low(ctx, precision_of(kept.dtype), kept.as<low16>(), values.as<float>(), values.numel());
}

inline void round_to(const Low16Ops& ops, Context& ctx, const Tensor& values, DType type) {
  if (type == DType::f32) return;
  require(ops, is_low16(type), "round_to a type that is not bf16 or fp16");
  ops.round_low(ctx, precision_of(type), values.as<float>(), values.numel());
}

inline Tensor narrow(const Low16Ops& ops, Context& ctx, const Tensor& values, DType type) {
  require(ops, is_low16(type), "narrow to a type that is not bf16 or fp16");
  low16* narrowed = ops.narrow_in_place(ctx, precision_of(type), values.as<float>(), values.numel());
  return Tensor{narrowed, type, values.shape, values.device};
}

}  // namespace typed_low16
}  // namespace trident::kernels
