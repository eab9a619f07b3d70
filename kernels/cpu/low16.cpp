// float32 <-> 16-bit conversions, bf16 and fp16 (OpenMP; the compiler vectorises them: bit
// arithmetic for bf16, the F16C / AVX512-FP16 conversion instructions for fp16).
#include <algorithm>
#include <cstring>
#include <vector>

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

inline float widen_bf16(bf16 value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// GCC's _Float16 conversions are IEEE's: round to nearest even, ±Inf beyond the range,
// subnormals kept, NaN stays NaN.
inline low16 round_to_fp16(float value) {
  const _Float16 half = static_cast<_Float16>(value);
  low16 bits;
  std::memcpy(&bits, &half, sizeof bits);
  return bits;
}

inline float widen_fp16(low16 bits) {
  _Float16 half;
  std::memcpy(&half, &bits, sizeof half);
  return static_cast<float>(half);
}

constexpr size_t kParallelFrom = 65536;  // below this, one thread is faster than waking a team

}  // namespace

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    default: return "fp32";
  }
}

void to_bf16(Context&, bf16* out, const float* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) out[i] = round_to_bf16(in[i]);
}

void from_bf16(Context&, float* out, const bf16* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) out[i] = widen_bf16(in[i]);
}

void to_fp16(Context&, low16* out, const float* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) out[i] = round_to_fp16(in[i]);
}

void from_fp16(Context&, float* out, const low16* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) out[i] = widen_fp16(in[i]);
}

void to_low(Context& ctx, Precision precision, low16* out, const float* in, size_t n) {
  if (precision == Precision::fp16) to_fp16(ctx, out, in, n);
  else to_bf16(ctx, out, in, n);
}

void from_low(Context& ctx, Precision precision, float* out, const low16* in, size_t n) {
  if (precision == Precision::fp16) from_fp16(ctx, out, in, n);
  else from_bf16(ctx, out, in, n);
}

void store_low(Context&, Precision precision, low16* kept, float* values, size_t n) {
  if (precision == Precision::fp16) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
    for (size_t i = 0; i < n; ++i) values[i] = widen_fp16(kept[i] = round_to_fp16(values[i]));
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
    for (size_t i = 0; i < n; ++i) values[i] = widen_bf16(kept[i] = round_to_bf16(values[i]));
  }
}

// Block k of S values (k >= 1) writes the bytes of values [kS/2, (k+1)S/2), all before its own
// block and read already, so each block converts in parallel; block 0 goes through a copy. The
// 16-bit stores are byte copies (no aliasing of float memory through another type).
low16* narrow_in_place(Context& ctx, Precision precision, float* values, size_t n) {
  constexpr size_t kBlock = size_t(1) << 16;
  char* bytes = reinterpret_cast<char*>(values);
  const size_t first = std::min(n, kBlock);
  std::vector<low16> head(first);
  to_low(ctx, precision, head.data(), values, first);
  std::memcpy(bytes, head.data(), first * sizeof(low16));
  for (size_t begin = kBlock; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
#pragma omp parallel for schedule(static)
    for (size_t i = begin; i < end; ++i) {
      const low16 value = precision == Precision::fp16 ? round_to_fp16(values[i]) : round_to_bf16(values[i]);
      std::memcpy(bytes + i * sizeof(low16), &value, sizeof value);
    }
  }
  return reinterpret_cast<low16*>(values);
}

void round_low(Context&, Precision precision, float* values, size_t n) {
  if (precision == Precision::fp16) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
    for (size_t i = 0; i < n; ++i) values[i] = widen_fp16(round_to_fp16(values[i]));
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
    for (size_t i = 0; i < n; ++i) values[i] = widen_bf16(round_to_bf16(values[i]));
  }
}

}  // namespace trident::kernels
