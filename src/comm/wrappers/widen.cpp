// Widening and rounding of 16-bit collective buffers.
#include "comm/wrappers/widen.hpp"

#include <cstdint>
#include <cstring>

namespace trident::comm {
namespace {

// Round to nearest, ties to even; NaN kept a quiet NaN (its payload must not carry into the
// exponent).
uint16_t bf16_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float of_bf16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// GCC's _Float16 conversions are IEEE's: nearest even, ±Inf beyond the range, NaN stays NaN.
uint16_t fp16_of(float value) {
  const _Float16 half = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, sizeof bits);
  return bits;
}

float of_fp16(uint16_t bits) {
  _Float16 half;
  std::memcpy(&half, &bits, sizeof half);
  return static_cast<float>(half);
}

}  // namespace

bool is_16bit(DType dtype) { return dtype == DType::bf16 || dtype == DType::fp16; }

void widen(DType dtype, const void* in, float* out, size_t n) {
  const uint16_t* from = static_cast<const uint16_t*>(in);
  if (dtype == DType::bf16)
    for (size_t i = 0; i < n; ++i) out[i] = of_bf16(from[i]);
  else
    for (size_t i = 0; i < n; ++i) out[i] = of_fp16(from[i]);
}

void narrow(DType dtype, const float* in, void* out, size_t n) {
  uint16_t* to = static_cast<uint16_t*>(out);
  if (dtype == DType::bf16)
    for (size_t i = 0; i < n; ++i) to[i] = bf16_of(in[i]);
  else
    for (size_t i = 0; i < n; ++i) to[i] = fp16_of(in[i]);
}

}  // namespace trident::comm
