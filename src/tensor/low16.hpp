// The host's scalar conversions of the two 16-bit types (DType::bf16, DType::fp16), each as its
// rounding from and widening to f32, written so that the compiler vectorizes the loops over them
// (bit arithmetic for bf16, the processor's conversion instructions for fp16): the CPU backend's
// passes (kernels/cpu/low16.cpp), the loops inside its kernels that widen or round as they go (the
// flash attention's tiles), and the collectives' 16-bit sums (comm/wrappers/widen.cpp). The CUDA
// kernels' are kernels/common/low16.hpp's bit arithmetic, held to these bit for bit by the unit
// tests.
#pragma once

#include <cstdint>
#include <cstring>

namespace trident {

// IEEE binary16 as the compiler's own type, whose conversions are the processor's: x86-64's F16C /
// AVX512-FP16 instructions through _Float16; AArch64's FCVT through __fp16 (GCC gives C++ no
// _Float16 there before GCC 13). Both round to nearest even, give ±Inf beyond the range, keep
// subnormals and keep NaN a NaN.
#if defined(__aarch64__)
using float16 = __fp16;
#else
using float16 = _Float16;
#endif

struct Bf16 {
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate. NaN is
  // kept a (quiet) NaN: rounding its payload could carry into the exponent and make it Inf.
  static uint16_t round(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(bits >> 16);
  }
  static float widen(uint16_t value) {
    const uint32_t bits = static_cast<uint32_t>(value) << 16;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
};

struct Fp16 {
  static uint16_t round(float value) {
    const float16 half = static_cast<float16>(value);
    uint16_t bits;
    std::memcpy(&bits, &half, sizeof bits);
    return bits;
  }
  static float widen(uint16_t bits) {
    float16 half;
    std::memcpy(&half, &bits, sizeof half);
    return static_cast<float>(half);
  }
};

}  // namespace trident
