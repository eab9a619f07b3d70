// exp for float, written so that the compiler vectorizes loops that call them (no
// library calls, no branches): the scalar libm calls were a quarter of a training step.
//   exp(x): x = n·ln2 + r with |r| ≤ ln2/2 (Cody–Waite split of ln2), e^r by its degree-6
//   Taylor polynomial (relative error < 2e-7 on that interval), 2^n built in the exponent bits.
//   Inputs are clamped to [-87.3, 88.3], where the result is a normal float.
#pragma once

#include <cstdint>

namespace trident::kernels {

inline float vexp(float x) {
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
  return p * __builtin_bit_cast(float, bits);  // 2^n; memcpy here would block vectorization
}

}  // namespace trident::kernels
