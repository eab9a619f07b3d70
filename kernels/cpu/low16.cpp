// float32 <-> 16-bit conversions, bf16 and fp16 (OpenMP; the compiler vectorises them: bit
// arithmetic for bf16, the F16C / AVX512-FP16 conversion instructions for fp16).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {
namespace {

// The two 16-bit types, each as its rounding from and widening to f32.
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

constexpr size_t kParallelFrom = 65536;  // below this, one thread is faster than waking a team

template <class Type>
void round_all(low16* out, const float* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) out[i] = Type::round(in[i]);
}

template <class Type>
void widen_all(float* out, const low16* in, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) out[i] = Type::widen(in[i]);
}

// Storing: kept = values rounded, values = kept widened.
template <class Type>
void store_all(low16* kept, float* values, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) values[i] = Type::widen(kept[i] = Type::round(values[i]));
}

template <class Type>
void round_in_place(float* values, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelFrom)
  for (size_t i = 0; i < n; ++i) values[i] = Type::widen(Type::round(values[i]));
}

// f(Bf16{}) or f(Fp16{}), as the precision says (not fp32).
template <class F>
void with_type(Precision precision, F&& f) {
  if (precision == Precision::fp16) f(Fp16{});
  else f(Bf16{});
}

}  // namespace

void to_bf16(Context&, bf16* out, const float* in, size_t n) { round_all<Bf16>(out, in, n); }
void from_bf16(Context&, float* out, const bf16* in, size_t n) { widen_all<Bf16>(out, in, n); }
void to_fp16(Context&, low16* out, const float* in, size_t n) { round_all<Fp16>(out, in, n); }
void from_fp16(Context&, float* out, const low16* in, size_t n) { widen_all<Fp16>(out, in, n); }

void to_low(Context&, Precision precision, low16* out, const float* in, size_t n) {
  with_type(precision, [&](auto type) { round_all<decltype(type)>(out, in, n); });
}

void from_low(Context&, Precision precision, float* out, const low16* in, size_t n) {
  with_type(precision, [&](auto type) { widen_all<decltype(type)>(out, in, n); });
}

void store_low(Context&, Precision precision, low16* kept, float* values, size_t n) {
  with_type(precision, [&](auto type) { store_all<decltype(type)>(kept, values, n); });
}

void round_low(Context&, Precision precision, float* values, size_t n) {
  with_type(precision, [&](auto type) { round_in_place<decltype(type)>(values, n); });
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
    with_type(precision, [&](auto type) {
#pragma omp parallel for schedule(static)
      for (size_t i = begin; i < end; ++i) {
        const low16 value = decltype(type)::round(values[i]);
        std::memcpy(bytes + i * sizeof(low16), &value, sizeof value);
      }
    });
  }
  return reinterpret_cast<low16*>(values);
}

}  // namespace trident::kernels::cpu
