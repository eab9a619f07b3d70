// bf16 conversions and the bf16 GEMM: rounding to nearest even (ties, carries into the exponent,
// Inf, NaN, the largest finite values), exact widening, and the bf16 GEMM against a
// double-precision reference on the same bf16 values (only the f32 accumulation differs).
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.hpp"

using trident::kernels::bf16;

namespace {

trident::kernels::Context ctx;

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bf16 round(float value) {
  bf16 out;
  trident::kernels::to_bf16(ctx, &out, &value, 1);
  return out;
}

float widen(bf16 value) {
  float out;
  trident::kernels::from_bf16(ctx, &out, &value, 1);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bf16_rounds_to_nearest_even) {
  BOOST_TEST(round(1.0f) == 0x3f80);
  BOOST_TEST(round(from_bits(0x3f808000u)) == 0x3f80);  // halfway, even below: down
  BOOST_TEST(round(from_bits(0x3f818000u)) == 0x3f82);  // halfway, odd below: up to even
  BOOST_TEST(round(from_bits(0x3f808001u)) == 0x3f81);  // above halfway: up
  BOOST_TEST(round(from_bits(0x3f807fffu)) == 0x3f80);  // below halfway: down
  BOOST_TEST(round(from_bits(0x3fffffffu)) == 0x4000);  // carry into the exponent
  BOOST_TEST(round(-2.5f) == 0xc020);
  BOOST_TEST(round(std::numeric_limits<float>::infinity()) == 0x7f80);
  BOOST_TEST(round(-std::numeric_limits<float>::infinity()) == 0xff80);
  BOOST_TEST(round(std::numeric_limits<float>::max()) == 0x7f80);  // rounds past the largest bf16
  BOOST_TEST(round(from_bits(0x7f7f7fffu)) == 0x7f7f);            // stays the largest finite
  const bf16 nan = round(std::numeric_limits<float>::quiet_NaN());
  BOOST_TEST(std::isnan(widen(nan)));
  BOOST_TEST(std::isnan(widen(round(from_bits(0x7fffffffu)))));  // payload all ones: still NaN
  BOOST_TEST(widen(round(0.0f)) == 0.0f);
  BOOST_TEST(std::signbit(widen(round(-0.0f))));
  for (uint32_t bits : {0x3f800000u, 0x40490000u, 0xbf120000u, 0x00010000u})  // exact values
    BOOST_TEST(widen(round(from_bits(bits))) == from_bits(bits));
}

BOOST_AUTO_TEST_CASE(bf16_batched_matmul_matches_reference) {
  const int batch = 2, M = 37, N = 29, K = 53;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::vector<float> a(size_t(batch) * M * K), b(size_t(batch) * K * N);
      for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * i);
      for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * i);
      std::vector<bf16> a16(a.size()), b16(b.size());
      trident::kernels::to_bf16(ctx, a16.data(), a.data(), a.size());
      trident::kernels::to_bf16(ctx, b16.data(), b.data(), b.size());
      trident::kernels::from_bf16(ctx, a.data(), a16.data(), a.size());  // the values the GEMM sees
      trident::kernels::from_bf16(ctx, b.data(), b16.data(), b.size());
      std::vector<float> c(size_t(batch) * M * N, 1.0f);
      trident::kernels::batched_matmul_bf16(ctx, c.data(), a16.data(), b16.data(), batch, M, N, K, ta, tb, true);
      double worst = 0.0;
      for (int p = 0; p < batch; ++p)
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            double sum = 1.0;  // accumulate = true onto ones
            for (int k = 0; k < K; ++k) {
              const float x = ta ? a[size_t(p) * M * K + size_t(k) * M + m] : a[size_t(p) * M * K + size_t(m) * K + k];
              const float y = tb ? b[size_t(p) * K * N + size_t(n) * K + k] : b[size_t(p) * K * N + size_t(k) * N + n];
              sum += double(x) * y;
            }
            worst = std::max(worst, std::abs(c[size_t(p) * M * N + size_t(m) * N + n] - sum) / (1.0 + std::abs(sum)));
          }
      BOOST_TEST(worst < 1e-5, "transpose a " << ta << " b " << tb << ": worst relative error " << worst);
    }
}
