// The CUDA emulator's fp16 type (tests/cuda_emu/README.md): the bits, and the conversions the
// kernels call — the compiler's own _Float16 conversions, which round to nearest even as the
// GPU's do.
#pragma once

#include <cstdint>
#include <cstring>

struct __half {
  uint16_t bits;
};

inline __half __float2half_rn(float value) {
  const _Float16 h = static_cast<_Float16>(value);
  __half out;
  std::memcpy(&out.bits, &h, 2);
  return out;
}
inline float __half2float(__half value) {
  _Float16 h;
  std::memcpy(&h, &value.bits, 2);
  return static_cast<float>(h);
}
inline unsigned short __half_as_ushort(__half value) { return value.bits; }
