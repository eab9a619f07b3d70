// Arithmetic shared by the CPU and CUDA backends: functions that compile as plain inline C++ for
// the CPU and as __host__ __device__ functions under nvcc, so that a CUDA kernel computes each
// element with the same operations as the CPU and the CPU unit tests reach that arithmetic on
// every machine (tests/unit/test_shared_arithmetic.cpp). Here: the bit casts and the
// vectorizable exp of the CPU kernels (which call it; the CUDA kernels call it too).
//   exp(x): x = n·ln2 + r with |r| ≤ ln2/2 (Cody–Waite split of ln2), e^r by its degree-6
//   Taylor polynomial (relative error < 2e-7 on that interval), 2^n built in the exponent bits.
//   Inputs are clamped to [-87.3, 88.3], where the result is a normal float.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TRIDENT_HD __host__ __device__
#else
#define TRIDENT_HD
#endif

namespace trident::kernels {

TRIDENT_HD inline uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

TRIDENT_HD inline float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

TRIDENT_HD inline float vexp(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
  // n = round(x / ln2) by the 1.5·2^23 trick (|x / ln2| < 128): floorf would not vectorize.
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
#if defined(__CUDA_ARCH__)
  return p * __int_as_float(bits);
#else
  return p * __builtin_bit_cast(float, bits);  // 2^n; memcpy here would block vectorization
#endif
}

}  // namespace trident::kernels
