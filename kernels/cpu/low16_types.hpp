// The CPU's scalar conversions of the two 16-bit types, each as its rounding from and widening to
// f32, written so that the compiler vectorizes the loops over them (bit arithmetic for bf16, the
// F16C / AVX512-FP16 conversion instructions for fp16): kernels/cpu/low16.cpp's passes, and the
// loops inside other kernels that widen or round as they go (the flash attention's tiles).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/kernels.hpp"

namespace trident::kernels::cpu {

struct Bf16 {
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate. NaN is
  // kept a (quiet) NaN: rounding its payload could carry into the exponent and make it Inf.
  static bf16 round(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16>((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<bf16>(bits >> 16);
  }
  static float widen(bf16 value) {
    const uint32_t bits = static_cast<uint32_t>(value) << 16;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
};

// GCC's _Float16 conversions are IEEE's: round to nearest even, ±Inf beyond the range,
// subnormals kept, NaN stays NaN.
struct Fp16 {
  static low16 round(float value) {
    const _Float16 half = static_cast<_Float16>(value);
    low16 bits;
    std::memcpy(&bits, &half, sizeof bits);
    return bits;
  }
  static float widen(low16 bits) {
    _Float16 half;
    std::memcpy(&half, &bits, sizeof half);
    return static_cast<float>(half);
  }
};

}  // namespace trident::kernels::cpu
