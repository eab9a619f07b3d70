// The CPU backend's operations on buffers and element types. The 16-bit storage of mixed
// precision is emulated here: a 16-bit activation is computed in f32 and stored rounded, and
// the f32 values the next kernels read are replaced by what was stored (store), so the f32
// kernels and the 16-bit GEMMs see the same values.
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/common/typed_low16.hpp"
#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {
namespace {

void require(bool condition, const char* what) {
  if (!condition) throw std::logic_error(std::string("kernels::cpu: ") + what);
}

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

void sum_into(Context& ctx, const Tensor& out, const Tensor& values) {
  if (out.dtype != DType::f64 || out.numel() != 1)
    throw std::logic_error("kernels::cpu: sum_into needs one f64 element to write");
  *out.as<double>() = cpu::sum(ctx, values);
}

namespace {
const Low16Ops kLow16{"cpu", &cpu::copy, &to_low, &from_low, &store_low, &round_low, &narrow_in_place};
}

void convert(Context& ctx, const Tensor& out, const Tensor& in) { typed_low16::convert(kLow16, ctx, out, in); }
void store(Context& ctx, const Tensor& kept, const Tensor& values) { typed_low16::store(kLow16, ctx, kept, values); }
void round_to(Context& ctx, const Tensor& values, DType type) { typed_low16::round_to(kLow16, ctx, values, type); }
Tensor narrow(Context& ctx, const Tensor& values, DType type) { return typed_low16::narrow(kLow16, ctx, values, type); }

}  // namespace trident::kernels::cpu
