// float32 <-> 16-bit conversions, bf16 and fp16 (OpenMP; the compiler vectorises them: bit
// arithmetic for bf16, the F16C / AVX512-FP16 conversion instructions for fp16).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu.hpp"
#include "tensor/low16.hpp"

namespace trident::kernels::cpu {
namespace {

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
