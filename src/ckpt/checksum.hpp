// The checksum of a checkpoint dataset: Σ over its elements of mix(i·φ ⊕ bits(x_i)), mod 2⁶⁴,
// with i the element's row-major index in the whole tensor, φ = 0x9e3779b97f4a7c15 (odd, so
// distinct indices give distinct products) and mix(x) = y ⊕ (y >> 31) with y = x·K, K odd — a
// bijection of one multiply (SplitMix64's finaliser has two; this runs at memory speed).
// A sum, so each rank adds the elements it wrote (or read) and one sum over the ranks gives
// the dataset's checksum whatever the layout; position-dependent, so a moved, truncated or
// bit-flipped element changes it (a single flipped bit always does: mix is a bijection).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "ckpt/slab.hpp"

namespace trident::ckpt {

inline uint64_t mix64(uint64_t x) {
  x *= 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 31);
}

inline uint64_t element_hash(int64_t index, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return mix64((static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ULL) ^ bits);
}

// The part of a dataset's checksum from `values`, the hyperslab's elements in order.
inline uint64_t partial_checksum(const std::vector<int64_t>& shape, const Hyperslab& slab, const float* values) {
  uint64_t sum = 0;
  for_each_run(shape, slab, [&](int64_t global_begin, int64_t length) {
    uint64_t run_sum = 0;  // wrapping addition is associative: any split gives the same sum
#pragma omp parallel for reduction(+ : run_sum) schedule(static) if (length >= 65536)
    for (int64_t i = 0; i < length; ++i) run_sum += element_hash(global_begin + i, values[i]);
    sum += run_sum;
    values += length;
  });
  return sum;
}

}  // namespace trident::ckpt
