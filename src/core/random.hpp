// Counter-based randomness: every random number is a pure function of (seed, stream, index),
// so any rank can produce any part of a random sequence without generating the rest — the same
// initialisation and the same data order for every parallel layout.
#pragma once

#include <cmath>
#include <cstdint>

namespace trident {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 64 random bits of (seed, stream, index).
inline uint64_t random_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t key = splitmix64(splitmix64(seed) ^ splitmix64(stream * 0x632be59bd9b4e019ULL + 1));
  return splitmix64(key ^ splitmix64(index));
}

// Uniform in (0, 1), never 0: 53 random bits.
inline double uniform_open(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// Standard normal of (seed, stream, index) by Box–Muller.
inline double normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = uniform_open(random_bits(seed, stream, 2 * index));
  const double u2 = uniform_open(random_bits(seed, stream, 2 * index + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Uniform integer in [0, n) of (seed, stream, index); n > 0. (Modulo bias < n / 2^64.)
inline uint64_t uniform_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n) {
  return random_bits(seed, stream, index) % n;
}

}  // namespace trident
