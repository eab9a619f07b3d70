// The 16-bit storage types as bit arithmetic shared by the CPU and CUDA backends: f32 → bf16 and
// f32 → fp16 rounding to nearest even, and the exact widening back. The CPU backend rounds with
// its own vectorized loops (tensor/low16.hpp: bit arithmetic for bf16, the processor's conversion
// instructions for fp16); the CUDA kernels call these, and the unit tests hold these to the
// CPU's, bit for bit (every fp16 value, random and edge-case floats).
#pragma once

#include <cstdint>

#include "kernels/common/math.hpp"

namespace trident::kernels {

// Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate. NaN is
// kept a (quiet) NaN: rounding its payload could carry into the exponent and make it Inf.
TRIDENT_HD inline uint16_t bf16_round(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

TRIDENT_HD inline float bf16_widen(uint16_t value) { return bits_float(static_cast<uint32_t>(value) << 16); }

// IEEE binary16, round to nearest even as the x86 conversion instructions do: |x| ≥ 65520 → ±Inf,
// results below 2^-14 subnormal (rounded by one float addition of a magic number, exact but for
// the rounding itself), NaN → a quiet NaN keeping the payload's top bits.
TRIDENT_HD inline uint16_t fp16_round(float value) {
  uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  bits &= 0x7fffffffu;
  uint32_t half;
  if (bits >= (127u + 16u) << 23) {  // ≥ 65536 (rounds to Inf), Inf or NaN
    half = bits > 0x7f800000u ? 0x7e00u | ((bits >> 13) & 0x3ffu) : 0x7c00u;
  } else if (bits < 113u << 23) {  // below 2^-14: subnormal or zero
    // Adding 2^-1 aligns the result's 10 mantissa bits at the bottom of the float's mantissa,
    // rounded to nearest even by the addition.
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    half = float_bits(bits_float(bits) + bits_float(magic)) - magic;
  } else {
    const uint32_t odd = (bits >> 13) & 1u;  // the kept mantissa's last bit: ties go to even
    bits += ((15u - 127u) << 23) + 0xfffu + odd;  // rebias the exponent, round (a carry may give Inf)
    half = bits >> 13;
  }
  return static_cast<uint16_t>(half | sign);
}

// Exact: every binary16 value is a float. NaN stays NaN (quieted), subnormals normalized.
TRIDENT_HD inline float fp16_widen(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1fu)  // Inf, NaN
    return bits_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u));
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_float(sign);
  uint32_t biased = 113;  // subnormal: mantissa · 2^-24, normalized
  while (!(mantissa & 0x400u)) mantissa <<= 1, --biased;
  return bits_float(sign | (biased << 23) | ((mantissa & 0x3ffu) << 13));
}

// Either type, as a DType-free flag (the kernels' template argument).
template <bool fp16>
TRIDENT_HD inline uint16_t low16_round(float value) {
  return fp16 ? fp16_round(value) : bf16_round(value);
}
template <bool fp16>
TRIDENT_HD inline float low16_widen(uint16_t value) {
  return fp16 ? fp16_widen(value) : bf16_widen(value);
}

}  // namespace trident::kernels
