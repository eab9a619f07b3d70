// float32 <-> bfloat16 conversions (OpenMP; the compiler vectorises the bit arithmetic).
#include <cstring>

#include "kernels/kernels.hpp"

namespace trident::kernels {
namespace {

// Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate. NaN is
// kept a (quiet) NaN: rounding its payload could carry into the exponent and make it Inf.
inline bf16 round_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<bf16>(bits >> 16);
}

}  // namespace

void to_bf16(Context&, bf16* out, const float* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
  for (size_t i = 0; i < n; ++i) out[i] = round_to_bf16(in[i]);
}

void from_bf16(Context&, float* out, const bf16* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(&out[i], &bits, sizeof bits);
  }
}

}  // namespace trident::kernels
