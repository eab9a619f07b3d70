// 16-bit storage: bf16 and fp16 conversions — rounding to nearest even (ties, carries into the
// exponent, Inf, NaN, the largest finite values, fp16's overflow and subnormals), exact
// widening, store_low / round_low — and the 16-bit GEMMs (batched bf16, the linear layer's
// forward and backward in bf16 and fp16) against a double-precision reference on the same
// 16-bit values (only the f32 accumulation differs). Then the fp16 loss scaler's rules.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_check.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/kernels.hpp"
#include "optim/loss_scaler.hpp"

using trident::DType;
using trident::testing::as_tensor;
using trident::kernels::bf16;
using trident::kernels::low16;
using trident::kernels::Precision;

namespace {

trident::kernels::Context ctx;

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// One value through the conversions of a 16-bit type (bf16 by default).
low16 round(float value, Precision type = Precision::bf16) {
  low16 out;
  trident::kernels::cpu::to_low(ctx, type, &out, &value, 1);
  return out;
}

float widen(low16 value, Precision type = Precision::bf16) {
  float out;
  trident::kernels::cpu::from_low(ctx, type, &out, &value, 1);
  return out;
}

low16 round16(float value) { return round(value, Precision::fp16); }
float widen16(low16 value) { return widen(value, Precision::fp16); }

}  // namespace

BOOST_AUTO_TEST_SUITE(low16_storage)

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
      trident::kernels::cpu::to_bf16(ctx, a16.data(), a.data(), a.size());
      trident::kernels::cpu::to_bf16(ctx, b16.data(), b.data(), b.size());
      trident::kernels::cpu::from_bf16(ctx, a.data(), a16.data(), a.size());  // the values the GEMM sees
      trident::kernels::cpu::from_bf16(ctx, b.data(), b16.data(), b.size());
      std::vector<float> c(size_t(batch) * M * N, 1.0f);
      trident::kernels::batched_matmul_bf16(ctx, as_tensor(c, {batch, M, N}),
                                            as_tensor(a16, DType::bf16, {batch, ta ? K : M, ta ? M : K}),
                                            as_tensor(b16, DType::bf16, {batch, tb ? N : K, tb ? K : N}), ta, tb, true);
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

BOOST_AUTO_TEST_CASE(fp16_rounds_to_nearest_even) {
  BOOST_TEST(round16(1.0f) == 0x3c00);
  BOOST_TEST(round16(from_bits(0x3f801000u)) == 0x3c00);  // 1 + 2^-11: halfway, even below: down
  BOOST_TEST(round16(from_bits(0x3f803000u)) == 0x3c02);  // 1 + 3·2^-11: halfway, odd below: up
  BOOST_TEST(round16(from_bits(0x3f801001u)) == 0x3c01);  // above halfway: up
  BOOST_TEST(round16(65504.0f) == 0x7bff);                // the largest finite fp16
  BOOST_TEST(round16(65519.0f) == 0x7bff);                // below the rounding boundary
  BOOST_TEST(round16(65520.0f) == 0x7c00);                // overflows to +Inf
  BOOST_TEST(round16(-1e6f) == 0xfc00);
  BOOST_TEST(round16(std::ldexp(1.0f, -24)) == 0x0001);   // the smallest subnormal
  BOOST_TEST(round16(std::ldexp(1.0f, -26)) == 0x0000);   // below half of it: zero
  BOOST_TEST(std::isnan(widen16(round16(std::numeric_limits<float>::quiet_NaN()))));
  BOOST_TEST(std::signbit(widen16(round16(-0.0f))));
  for (float exact : {1.0f, -2.5f, 0.099975586f, 1023.5f, std::ldexp(3.0f, -20)})
    BOOST_TEST(widen16(round16(exact)) == exact);
}

BOOST_AUTO_TEST_CASE(store_low_keeps_what_the_kernels_read_next) {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    std::vector<float> values(100), again(100), rounded(100);
    for (size_t i = 0; i < values.size(); ++i) values[i] = rounded[i] = std::sin(0.7f * i) * 300.0f;
    std::vector<low16> kept(values.size());
    trident::kernels::cpu::store_low(ctx, p, kept.data(), values.data(), values.size());
    trident::kernels::cpu::from_low(ctx, p, again.data(), kept.data(), kept.size());
    trident::kernels::cpu::round_low(ctx, p, rounded.data(), rounded.size());
    BOOST_TEST(values == again);    // values became exactly the stored 16-bit values
    BOOST_TEST(rounded == again);   // round_low: the same rounding in place
    BOOST_TEST(std::abs(values[1] - std::sin(0.7f) * 300.0f) <= std::abs(values[1]) * (p == Precision::bf16 ? 4e-3 : 5e-4));
  }
}

BOOST_AUTO_TEST_CASE(narrow_in_place_equals_to_low) {
  const size_t n = 3 * 65536 + 17;  // several blocks and a partial one
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = std::sin(0.001f * i) * 1000.0f + 1e-3f * i;
    std::vector<low16> expected(n);
    trident::kernels::cpu::to_low(ctx, p, expected.data(), values.data(), n);
    const low16* narrowed = trident::kernels::cpu::narrow_in_place(ctx, p, values.data(), n);
    BOOST_TEST(static_cast<const void*>(narrowed) == static_cast<const void*>(values.data()));
    BOOST_TEST(std::memcmp(narrowed, expected.data(), n * sizeof(low16)) == 0);
  }
}

// The linear layer on 16-bit operands against double sums of the same 16-bit values:
// y = x wᵀ + b, dx = dy w, dw += dyᵀ x, db += Σ dy (from the f32 dy). Widened, and natively
// where oneDNN has the type's matmul on this CPU.
BOOST_AUTO_TEST_CASE(linear_low_matches_reference) {
  const int M = 33, K = 24, N = 40;
  for (Precision p : {Precision::bf16, Precision::fp16})
  for (auto path : {trident::kernels::Low16Gemm::widened, trident::kernels::Low16Gemm::native}) {
    if (path == trident::kernels::Low16Gemm::native && !trident::kernels::native_low16_gemm_available(p)) continue;
    trident::kernels::Context ctx;
    ctx.low16_gemm = path;
    auto make = [&](size_t n, float f) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = std::sin(f * i + 0.3f);
      std::vector<low16> v16(n);
      trident::kernels::cpu::store_low(ctx, p, v16.data(), v.data(), n);  // v: the 16-bit values
      return std::make_pair(v, v16);
    };
    auto [x, x16] = make(size_t(M) * K, 0.37f);
    auto [w, w16] = make(size_t(N) * K, 0.11f);
    auto [dy, dy16] = make(size_t(M) * N, 0.23f);
    std::vector<float> bias(N, 0.5f), y(size_t(M) * N), dx(size_t(M) * K), dw(size_t(N) * K, 1.0f), db(N, 2.0f);
    trident::kernels::cpu::linear_forward_low(ctx, p, y.data(), x16.data(), w16.data(), bias.data(), M, K, N);
    trident::kernels::cpu::linear_backward_low(ctx, p, dx.data(), dw.data(), db.data(), dy.data(), dy16.data(),
                                          x16.data(), w16.data(), M, K, N);
    double worst = 0.0;
    auto check = [&](double got, double want) { worst = std::max(worst, std::abs(got - want) / (1.0 + std::abs(want))); };
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double sum = 0.5;
        for (int k = 0; k < K; ++k) sum += double(x[m * K + k]) * w[n * K + k];
        check(y[m * N + n], sum);
      }
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) {
        double sum = 0.0;
        for (int n = 0; n < N; ++n) sum += double(dy[m * N + n]) * w[n * K + k];
        check(dx[m * K + k], sum);
      }
    for (int n = 0; n < N; ++n) {
      double bias_sum = 2.0;
      for (int k = 0; k < K; ++k) {
        double sum = 1.0;
        for (int m = 0; m < M; ++m) sum += double(dy[m * N + n]) * x[m * K + k];
        check(dw[n * K + k], sum);
      }
      for (int m = 0; m < M; ++m) bias_sum += dy[m * N + n];
      check(db[n], bias_sum);
    }
    BOOST_TEST(worst < 1e-5, trident::kernels::precision_name(p) << (path == trident::kernels::Low16Gemm::native ? " native" : " widened")
                                                               << ": worst relative error " << worst);
  }
}

BOOST_AUTO_TEST_CASE(loss_scaler_follows_hysteresis_backoff_and_growth) {
  trident::optim::LossScaleSettings settings;
  settings.initial_scale = 1024, settings.min_scale = 256, settings.window = 3, settings.hysteresis = 2;
  trident::optim::LossScaler scaler(settings);
  scaler.update(true);  // the first overflow is tolerated
  BOOST_TEST(scaler.scale() == 1024);
  scaler.update(false);  // a good step in between does not refill the hysteresis
  scaler.update(true);
  BOOST_TEST(scaler.scale() == 512);
  scaler.update(true);  // from now on every overflow backs off, down to the minimum
  BOOST_TEST(scaler.scale() == 256);
  scaler.update(true);
  BOOST_TEST(scaler.scale() == 256);
  for (int i = 0; i < 2; ++i) scaler.update(false);
  BOOST_TEST(scaler.scale() == 256);
  scaler.update(false);  // the third good step in a row: growth, hysteresis refilled
  BOOST_TEST(scaler.scale() == 512);
  BOOST_TEST(scaler.state().hysteresis_left == 2);
  BOOST_TEST(scaler.state().good_steps == 0);
  scaler.update(true);
  BOOST_TEST(scaler.scale() == 512);
  trident::optim::LossScaler copy(settings);  // the state is all there is to restore
  copy.restore(scaler.state());
  copy.update(true);
  scaler.update(true);
  BOOST_TEST(copy.scale() == scaler.scale());
  BOOST_TEST(copy.scale() == 256);
}

// bf16 attention against the f32 kernels on the same (bf16-valued) q, k, v: the only
// differences are the roundings of P, dy and dS to bf16, each 2^-9 relative, so the relative L2
// error of the output and of the gradients stays within a few of those (measured 1e-3, 3e-3). The probabilities
// kept in att_low are att's f32 values exactly, and causal (zero above the diagonal).
BOOST_AUTO_TEST_CASE(bf16_attention_follows_f32) {
  const int B = 2, T = 16, C = 32, NH = 4;
  const size_t n_qkv = size_t(B) * T * 3 * C, n_out = size_t(B) * T * C, n_att = size_t(B) * NH * T * T;
  std::vector<float> qkv(n_qkv), dout(n_out);
  for (size_t i = 0; i < n_qkv; ++i) qkv[i] = std::sin(0.37f * i) * 2.0f;
  for (size_t i = 0; i < n_out; ++i) dout[i] = std::cos(0.13f * i);
  std::vector<bf16> qkv16(n_qkv), att16(n_att), dout16(n_out);
  trident::kernels::cpu::store_low(ctx, Precision::bf16, qkv16.data(), qkv.data(), n_qkv);
  std::vector<float> out(n_out), att(n_att), datt(n_att), dqkv(n_qkv);
  std::vector<float> out32(n_out), att32(n_att), datt32(n_att), dqkv32(n_qkv);
  const trident::Shape sequence{B, T, 3 * C};
  const trident::Tensor qkv_low = as_tensor(qkv16, DType::bf16, sequence);
  const trident::Tensor att_low = as_tensor(att16, DType::bf16, {B, NH, T, T});
  trident::kernels::attention_forward(ctx, as_tensor(out32), as_tensor(att32), as_tensor(qkv, sequence), NH);
  trident::kernels::attention_backward(ctx, as_tensor(dqkv32), as_tensor(datt32), as_tensor(dout),
                                       as_tensor(qkv, sequence), as_tensor(att32), NH);
  trident::kernels::attention_forward_bf16(ctx, as_tensor(out), as_tensor(att), att_low, qkv_low, NH);
  trident::kernels::attention_backward_bf16(ctx, as_tensor(dqkv), as_tensor(datt), as_tensor(dout),
                                            as_tensor(dout16, DType::bf16, {B, T, C}), qkv_low, as_tensor(att), att_low,
                                            NH);
  auto relative = [](const std::vector<float>& got, const std::vector<float>& want) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) diff += std::pow(got[i] - double(want[i]), 2), norm += std::pow(double(want[i]), 2);
    return std::sqrt(diff / norm);
  };
  BOOST_TEST_MESSAGE("bf16 attention, relative L2 error: output " << relative(out, out32) << ", gradient "
                                                                 << relative(dqkv, dqkv32));
  BOOST_TEST(relative(out, out32) < 4e-3, "output " << relative(out, out32));
  BOOST_TEST(relative(dqkv, dqkv32) < 1e-2, "gradient " << relative(dqkv, dqkv32));
  bool kept = true, causal = true;
  for (size_t i = 0; i < n_att; ++i) {
    kept = kept && widen(att16[i]) == att[i];
    causal = causal && ((i % T) <= (i / T) % T || att[i] == 0.0f);
  }
  BOOST_TEST(kept);
  BOOST_TEST(causal);
}

BOOST_AUTO_TEST_SUITE_END()
