// The CPU backend's operations on buffers and element types. The 16-bit storage of mixed
// precision is emulated here: a 16-bit activation is computed in f32 and stored rounded, and
// the f32 values the next kernels read are replaced by what was stored (store), so the f32
// kernels and the 16-bit GEMMs see the same values.
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {
namespace {

void require(bool condition, const char* what) {
  if (!condition) throw std::logic_error(std::string("kernels::cpu: ") + what);
}

bool is_low16(DType dtype) { return dtype == DType::bf16 || dtype == DType::fp16; }

}  // namespace

void clear(Context&, const Tensor& t) {
  if (t.bytes()) std::memset(t.data, 0, t.bytes());
}

void copy(Context&, const Tensor& dst, const Tensor& src) {
  require(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy between tensors of different types or sizes");
  if (src.bytes() && dst.data != src.data) std::memcpy(dst.data, src.data, src.bytes());
}

void upload(Context&, const Tensor& dst, const void* host) {
  if (dst.bytes()) std::memcpy(dst.data, host, dst.bytes());
}

void download(Context&, void* host, const Tensor& src) {
  if (src.bytes()) std::memcpy(host, src.data, src.bytes());
}

double sum(Context&, const Tensor& values) {
  const float* x = values.as<float>();
  double total = 0.0;
  for (size_t i = 0, n = values.numel(); i < n; ++i) total += x[i];
  return total;
}

void convert(Context& ctx, const Tensor& out, const Tensor& in) {
  require(out.numel() == in.numel(), "convert between tensors of different sizes");
  if (out.dtype == in.dtype) return cpu::copy(ctx, out, in);
  if (in.dtype == DType::f32 && is_low16(out.dtype))
    return to_low(ctx, precision_of(out.dtype), out.as<low16>(), in.as<float>(), in.numel());
  if (is_low16(in.dtype) && out.dtype == DType::f32)
    return from_low(ctx, precision_of(in.dtype), out.as<float>(), in.as<low16>(), in.numel());
  throw std::logic_error(std::string("kernels::cpu: no conversion from ") + dtype_name(in.dtype) + " to " +
                         dtype_name(out.dtype));
}

void store(Context& ctx, const Tensor& kept, const Tensor& values) {
  require(kept.numel() == values.numel(), "store into a tensor of another size");
  if (kept.dtype == DType::f32) return cpu::copy(ctx, kept, values);
  store_low(ctx, precision_of(kept.dtype), kept.as<low16>(), values.as<float>(), values.numel());
}

void round_to(Context& ctx, const Tensor& values, DType type) {
  if (type == DType::f32) return;
  require(is_low16(type), "round_to a type that is not bf16 or fp16");
  round_low(ctx, precision_of(type), values.as<float>(), values.numel());
}

Tensor narrow(Context& ctx, const Tensor& values, DType type) {
  require(is_low16(type), "narrow to a type that is not bf16 or fp16");
  low16* narrowed = narrow_in_place(ctx, precision_of(type), values.as<float>(), values.numel());
  return Tensor{narrowed, type, values.shape, values.device};
}

}  // namespace trident::kernels::cpu
