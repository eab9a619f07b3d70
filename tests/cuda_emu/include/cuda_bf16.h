// The CUDA emulator's bf16 type (tests/cuda_emu/README.md): the bits, and the conversions the
// kernels call, rounding to nearest even as the GPU's do.
#pragma once

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  uint16_t bits;
};

inline __nv_bfloat16 __float2bfloat16_rn(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((bits >> 16) | 0x40u)};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<uint16_t>(bits >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 value) { return value.bits; }
