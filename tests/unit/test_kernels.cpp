// Every CPU kernel: forward against a naive double-precision reference, backward against
// central finite differences; and the operations' checks of their tensors' dtypes and extents.
#include <omp.h>

#include <stdexcept>
#include <string>

#include "kernel_check.hpp"
#include "kernels/common/elementwise.hpp"
#include "kernels/common/math.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/openmp_alternatives.hpp"
#include "kernels/kernels.hpp"

using namespace trident;
using namespace trident::testing;
using trident::kernels::Context;

namespace {

Context ctx;

// y = x wᵀ + b in double
std::vector<double> linear_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>& b, int M, int K, int N) {
  std::vector<double> y(static_cast<size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double sum = b.empty() ? 0.0 : b[n];
      for (int k = 0; k < K; ++k) sum += static_cast<double>(x[m * K + k]) * w[n * K + k];
      y[m * N + n] = sum;
    }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels)

BOOST_AUTO_TEST_CASE(linear_forward_matches_reference) {
  const int M = 37, K = 29, N = 23;
  auto x = random_vector(M * K, 1), w = random_vector(N * K, 2), b = random_vector(N, 3);
  std::vector<float> y(M * N);
  trident::kernels::cpu::linear_forward(ctx, y.data(), x.data(), w.data(), b.data(), M, K, N);
  expect_close(y, linear_reference(x, w, b, M, K, N), 1e-4, 1e-2, "linear forward");
  trident::kernels::cpu::linear_forward(ctx, y.data(), x.data(), w.data(), nullptr, M, K, N);
  expect_close(y, linear_reference(x, w, {}, M, K, N), 1e-4, 1e-2, "linear forward, no bias");
}

BOOST_AUTO_TEST_CASE(linear_backward_matches_finite_differences) {
  const int M = 6, K = 5, N = 7;
  auto x = random_vector(M * K, 4), w = random_vector(N * K, 5), b = random_vector(N, 6);
  const auto upstream = random_vector(M * N, 7);
  std::vector<float> dx(M * K, 0.5f), dw(N * K, 0.25f), db(N, -1.0f);  // dx overwritten, others +=
  trident::kernels::cpu::linear_backward(ctx, dx.data(), dw.data(), db.data(), upstream.data(), x.data(),
                           w.data(), M, K, N);
  for (float& v : dw) v -= 0.25f;
  for (float& v : db) v += 1.0f;
  auto loss = [&] {
    std::vector<float> y(M * N);
    trident::kernels::cpu::linear_forward(ctx, y.data(), x.data(), w.data(), b.data(), M, K, N);
    return weighted_sum(y, upstream);
  };
  check_gradient(x, dx, loss, "linear dx");
  check_gradient(w, dw, loss, "linear dw");
  check_gradient(b, db, loss, "linear dbias");
}

BOOST_AUTO_TEST_CASE(batched_matmul_transposes_and_accumulation) {
  const int batch = 3, M = 5, N = 4, K = 6;
  for (int variant = 0; variant < 8; ++variant) {
    const bool ta = variant & 1, tb = variant & 2, acc = variant & 4;
    auto a = random_vector(batch * M * K, 10 + variant), b = random_vector(batch * K * N, 20 + variant);
    auto c = random_vector(batch * M * N, 30 + variant);
    std::vector<double> expected(c.size());
    for (int p = 0; p < batch; ++p)
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          double sum = acc ? c[(p * M + m) * N + n] : 0.0;
          for (int k = 0; k < K; ++k) {
            const float av = ta ? a[p * M * K + k * M + m] : a[p * M * K + m * K + k];
            const float bv = tb ? b[p * K * N + n * K + k] : b[p * K * N + k * N + n];
            sum += static_cast<double>(av) * bv;
          }
          expected[(p * M + m) * N + n] = sum;
        }
    trident::kernels::batched_matmul(ctx, as_tensor(c, {batch, M, N}), as_tensor(a, {batch, ta ? K : M, ta ? M : K}),
                                     as_tensor(b, {batch, tb ? N : K, tb ? K : N}), ta, tb, acc);
    expect_close(c, expected, 1e-4, 1e-2, "batched matmul variant " + std::to_string(variant));
  }
}

BOOST_AUTO_TEST_CASE(layernorm_forward_and_backward) {
  const int N = 5, C = 16;
  auto x = random_vector(N * C, 40, 2.0f), w = random_vector(C, 41), b = random_vector(C, 42);
  std::vector<float> y(N * C), mean(N), variance(N);
  trident::kernels::layernorm_forward(ctx, as_tensor(y), as_tensor(mean), as_tensor(variance), as_tensor(x, {N, C}),
                                      as_tensor(w), as_tensor(b));
  const std::vector<double> expected = layernorm_reference(x, w, b, N, C);
  expect_close(y, expected, 1e-5, 1e-3, "layernorm forward");
  const auto upstream = random_vector(N * C, 43);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  std::vector<float> dx_base = random_vector(N * C, 44), dw_base = random_vector(C, 45);
  dx = dx_base, dw = dw_base;  // accumulates onto what is there
  trident::kernels::layernorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(db), as_tensor(upstream),
                                       as_tensor(x, {N, C}), as_tensor(w), as_tensor(b), as_tensor(mean),
                                       as_tensor(variance));
  for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx_base[i];
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw_base[i];
  auto loss = [&] {
    std::vector<float> out(N * C), m(N), r(N);
    trident::kernels::layernorm_forward(ctx, as_tensor(out), as_tensor(m), as_tensor(r), as_tensor(x, {N, C}),
                                        as_tensor(w), as_tensor(b));
    return weighted_sum(out, upstream);
  };
  check_gradient(x, dx, loss, "layernorm dinp", 1e-2f, 3e-2);
  check_gradient(w, dw, loss, "layernorm dweight");
  check_gradient(b, db, loss, "layernorm dbias");
}

// Written in a 16-bit type (the model's kept ln1, ln2, lnf), the output is the f32 output rounded
// (kernels::store's), bit for bit, with the same statistics; in both arithmetics.
BOOST_AUTO_TEST_CASE(layernorm_writes_16_bit_outputs) {
  const int N = 7, C = 48;
  const auto x = random_vector(N * C, 46, 2.0f), w = random_vector(C, 47), b = random_vector(C, 48);
  for (auto arithmetic : {trident::kernels::Arithmetic::native, trident::kernels::Arithmetic::portable}) {
    Context c;
    c.arithmetic = arithmetic;
    std::vector<float> y(N * C), mean(N), variance(N);
    trident::kernels::layernorm_forward(c, as_tensor(y), as_tensor(mean), as_tensor(variance), as_tensor(x, {N, C}),
                               as_tensor(w), as_tensor(b));
    for (DType type : {DType::bf16, DType::fp16}) {
      std::vector<trident::kernels::low16> expected(y.size()), out(y.size());
      std::vector<float> m(N), v(N);
      trident::kernels::store(c, view(expected.data(), type, expected.size()), as_tensor(std::vector<float>(y)));
      trident::kernels::layernorm_forward(c, view(out.data(), type, out.size()), as_tensor(m), as_tensor(v),
                                 as_tensor(x, {N, C}), as_tensor(w), as_tensor(b));
      BOOST_TEST(out == expected, boost::test_tools::per_element());
      BOOST_TEST(m == mean, boost::test_tools::per_element());
      BOOST_TEST(v == variance, boost::test_tools::per_element());
    }
  }
}

// Backward from a 16-bit model's kept input, widened as read: the f32 backward's results on the
// widened values, bit for bit (native and portable arithmetic).
BOOST_AUTO_TEST_CASE(layernorm_backward_reads_16_bit_inputs) {
  const int N = 7, C = 48;
  const auto x32 = random_vector(N * C, 146, 2.0f), w = random_vector(C, 147), b = random_vector(C, 148);
  const auto dout = random_vector(N * C, 149);
  for (auto arithmetic : {trident::kernels::Arithmetic::native, trident::kernels::Arithmetic::portable}) {
    Context c;
    c.arithmetic = arithmetic;
    for (DType type : {DType::bf16, DType::fp16}) {
      std::vector<trident::kernels::low16> x_low(x32.size());
      std::vector<float> x(x32.size()), y(x32.size()), mean(N), variance(N);
      trident::kernels::convert(c, view(x_low.data(), type, x_low.size()), as_tensor(x32));
      trident::kernels::convert(c, as_tensor(x), view(x_low.data(), type, x_low.size()));
      trident::kernels::layernorm_forward(c, as_tensor(y), as_tensor(mean), as_tensor(variance), as_tensor(x, {N, C}),
                                          as_tensor(w), as_tensor(b));
      const auto held = random_vector(N * C, 150), held_w = random_vector(C, 151), held_b = random_vector(C, 152);
      std::vector<float> dx = held, dw = held_w, db = held_b, dx16 = held, dw16 = held_w, db16 = held_b;
      trident::kernels::layernorm_backward(c, as_tensor(dx), as_tensor(dw), as_tensor(db), as_tensor(dout),
                                           as_tensor(x, {N, C}), as_tensor(w), as_tensor(b), as_tensor(mean),
                                           as_tensor(variance));
      trident::kernels::layernorm_backward(c, as_tensor(dx16), as_tensor(dw16), as_tensor(db16), as_tensor(dout),
                                           view(x_low.data(), type, x_low.size()).reshaped({N, C}), as_tensor(w),
                                           as_tensor(b), as_tensor(mean), as_tensor(variance));
      BOOST_TEST(dx16 == dx, boost::test_tools::per_element());
      BOOST_TEST(dw16 == dw, boost::test_tools::per_element());
      BOOST_TEST(db16 == db, boost::test_tools::per_element());
    }
  }
}

// The input gradient's 16-bit copy (what the next backward GEMM reads): dinp's values after the
// sum, rounded, beside the same dinp, dweight and dbias — from an f32 input (the stage's last
// output, read by the final norm) and from a 16-bit one.
BOOST_AUTO_TEST_CASE(layernorm_backward_writes_its_input_gradient_in_16_bits) {
  const int N = 6, C = 40;
  const auto x32 = random_vector(N * C, 153, 2.0f), w = random_vector(C, 154), b = random_vector(C, 155);
  const auto dout = random_vector(N * C, 156), held = random_vector(N * C, 157);
  std::vector<float> y(N * C), mean(N), variance(N);
  trident::kernels::layernorm_forward(ctx, as_tensor(y), as_tensor(mean), as_tensor(variance), as_tensor(x32, {N, C}),
                                      as_tensor(w), as_tensor(b));
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<trident::kernels::low16> x_low(x32.size());
    trident::kernels::convert(ctx, view(x_low.data(), type, x_low.size()), as_tensor(x32));
    const Tensor low_input = view(x_low.data(), type, x_low.size()).reshaped({N, C});
    for (const Tensor& inp : {as_tensor(x32, {N, C}), low_input}) {
      std::vector<float> dx = held, dw(C, 0.5f), db(C, 0.25f), dx2 = held, dw2 = dw, db2 = db;
      std::vector<trident::kernels::low16> copy(N * C, 0xFFFF), expected(N * C);
      trident::kernels::layernorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(db), as_tensor(dout), inp,
                                           as_tensor(w), as_tensor(b), as_tensor(mean), as_tensor(variance));
      trident::kernels::layernorm_backward(ctx, as_tensor(dx2), as_tensor(dw2), as_tensor(db2), as_tensor(dout), inp,
                                           as_tensor(w), as_tensor(b), as_tensor(mean), as_tensor(variance),
                                           view(copy.data(), type, copy.size()));
      trident::kernels::convert(ctx, view(expected.data(), type, expected.size()), as_tensor(dx));
      BOOST_TEST(dx2 == dx, boost::test_tools::per_element());
      BOOST_TEST(dw2 == dw, boost::test_tools::per_element());
      BOOST_TEST(db2 == db, boost::test_tools::per_element());
      BOOST_TEST(copy == expected, boost::test_tools::per_element());
    }
    // A copy of another type than the 16-bit input's, or an f32 one, is refused.
    std::vector<float> dx = held, dw(C), db(C), f32_copy(N * C);
    std::vector<trident::kernels::low16> copy(N * C);
    const DType other = type == DType::bf16 ? DType::fp16 : DType::bf16;
    BOOST_CHECK_THROW(trident::kernels::layernorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(db),
                                                           as_tensor(dout), low_input, as_tensor(w), as_tensor(b),
                                                           as_tensor(mean), as_tensor(variance),
                                                           view(copy.data(), other, copy.size())),
                      std::logic_error);
    BOOST_CHECK_THROW(trident::kernels::layernorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(db),
                                                           as_tensor(dout), as_tensor(x32, {N, C}), as_tensor(w),
                                                           as_tensor(b), as_tensor(mean), as_tensor(variance),
                                                           as_tensor(f32_copy)),
                      std::logic_error);
  }
}

BOOST_AUTO_TEST_CASE(gelu_forward_and_backward) {
  auto x = random_vector(300, 50, 2.0f);
  std::vector<float> y(x.size());
  trident::kernels::gelu_forward(ctx, as_tensor(y), as_tensor(x));
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    expected[i] = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  // oneDNN's gelu_tanh is off by up to 1.4e-7 (x86-64: AVX2, AVX-512) and 4.6e-7 (AArch64's
  // 512-bit SVE kernel) near x = -4, where GELU is about -1e-4: 0.1-0.4% of it, a few float steps
  // of values of order 1. The floor 1e-2 judges such values to 1e-6 absolute, the rest to 1e-4
  // relative.
  expect_close(y, expected, 1e-4, 1e-2, "gelu forward");
  const auto upstream = random_vector(x.size(), 51);
  std::vector<float> dx(x.size());
  trident::kernels::gelu_backward(ctx, as_tensor(dx), as_tensor(x), as_tensor(upstream));
  auto loss = [&] {
    std::vector<float> out(x.size());
    trident::kernels::gelu_forward(ctx, as_tensor(out), as_tensor(x));
    return weighted_sum(out, upstream);
  };
  check_gradient(x, dx, loss, "gelu dinp", 1e-2f, 2e-2, 1e-3, 300);
}

BOOST_AUTO_TEST_CASE(residual_and_add) {
  auto a = random_vector(100, 60), b = random_vector(100, 61);
  std::vector<float> out(100);
  trident::kernels::residual_forward(ctx, as_tensor(out), as_tensor(a), as_tensor(b));
  std::vector<double> expected(100);
  for (int i = 0; i < 100; ++i) expected[i] = static_cast<double>(a[i]) + b[i];
  expect_close(out, expected, 1e-6, 1e-6, "residual");
  trident::kernels::add_inplace(ctx, as_tensor(out), as_tensor(a));
  for (int i = 0; i < 100; ++i) expected[i] = expected[i] + a[i];
  expect_close(out, expected, 1e-6, 1e-6, "add in place");
  // With the kept 16-bit copy in the same operation: store's result on the sums, bit for bit (with
  // and without the bias); an f32 "kept" is refused.
  const int M = 4, N = 25;
  const auto bias = random_vector(N, 62);
  for (DType type : {DType::bf16, DType::fp16}) {
    for (bool with_bias : {false, true}) {
      std::vector<float> sums(100), values(100);
      std::vector<trident::kernels::low16> expected_kept(100), kept(100);
      if (with_bias) {
        trident::kernels::bias_residual_forward(ctx, as_tensor(sums), as_tensor(a), as_tensor(b, {M, N}), as_tensor(bias));
        trident::kernels::bias_residual_forward(ctx, as_tensor(values), as_tensor(a), as_tensor(b, {M, N}),
                                                as_tensor(bias), view(kept.data(), type, kept.size()));
      } else {
        trident::kernels::residual_forward(ctx, as_tensor(sums), as_tensor(a), as_tensor(b));
        trident::kernels::residual_forward(ctx, as_tensor(values), as_tensor(a), as_tensor(b),
                                           view(kept.data(), type, kept.size()));
      }
      trident::kernels::store(ctx, view(expected_kept.data(), type, expected_kept.size()), as_tensor(sums));
      BOOST_TEST(kept == expected_kept, boost::test_tools::per_element());
      BOOST_TEST(values == sums, boost::test_tools::per_element());  // store left the rounded values in sums
    }
  }
  std::vector<float> f32_kept(100);
  BOOST_CHECK_THROW(trident::kernels::residual_forward(ctx, as_tensor(out), as_tensor(a), as_tensor(b), as_tensor(f32_kept)),
                    std::logic_error);
}

namespace {

// Naive causal attention in double: qkv (B, T, 3C) -> out (B, T, C).
std::vector<double> attention_reference(const std::vector<float>& qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  std::vector<double> out(static_cast<size_t>(B) * T * C, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = &qkv[(b * T + t) * 3 * C + h * hs];
        std::vector<double> score(t + 1);
        double max = -1e300, sum = 0;
        for (int s = 0; s <= t; ++s) {
          const float* k = &qkv[(b * T + s) * 3 * C + C + h * hs];
          double dot = 0;
          for (int i = 0; i < hs; ++i) dot += static_cast<double>(q[i]) * k[i];
          score[s] = dot / std::sqrt(static_cast<double>(hs));
          max = std::max(max, score[s]);
        }
        for (int s = 0; s <= t; ++s) sum += score[s] = std::exp(score[s] - max);
        for (int s = 0; s <= t; ++s) {
          const float* v = &qkv[(b * T + s) * 3 * C + 2 * C + h * hs];
          for (int i = 0; i < hs; ++i) out[(b * T + t) * C + h * hs + i] += score[s] / sum * v[i];
        }
      }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(attention_forward_and_backward) {
  const int B = 2, T = 5, C = 8, NH = 2;
  const size_t probs = static_cast<size_t>(B) * NH * T * T;
  auto qkv = random_vector(B * T * 3 * C, 70);
  std::vector<float> out(B * T * C), att(probs);
  trident::kernels::attention_forward(ctx, as_tensor(out), as_tensor(att), as_tensor(qkv, {B, T, 3 * C}), NH);
  expect_close(out, attention_reference(qkv, B, T, C, NH), 1e-5, 1e-3, "attention forward");
  const auto upstream = random_vector(out.size(), 71);
  std::vector<float> dqkv(qkv.size(), 99.0f), datt(probs);  // dqkv is overwritten
  trident::kernels::attention_backward(ctx, as_tensor(dqkv), as_tensor(datt), as_tensor(upstream),
                                       as_tensor(qkv, {B, T, 3 * C}), as_tensor(att), NH);
  auto loss = [&] {
    std::vector<float> o(B * T * C), a2(probs);
    trident::kernels::attention_forward(ctx, as_tensor(o), as_tensor(a2), as_tensor(qkv, {B, T, 3 * C}), NH);
    return weighted_sum(o, upstream);
  };
  check_gradient(qkv, dqkv, loss, "attention dqkv", 1e-2f, 2e-2, 1e-3, 240);
}

// A bf16/fp16 model's table: each row widened exactly, the slice's zeros as with f32.
BOOST_AUTO_TEST_CASE(embedding_forward_reads_a_16_bit_table_widened) {
  const int B = 2, T = 3, C = 5, V = 4;
  const std::vector<int32_t> tokens = {3, 0, 2, 2, 1, 3};
  const auto wte = random_vector(V * C, 82);
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<uint16_t> low(wte.size());
    std::vector<float> widened(wte.size()), from_low(B * T * C, -1.0f), from_f32(B * T * C, -2.0f);
    trident::kernels::convert(ctx, as_tensor(low, type, {V, C}), as_tensor(wte));
    trident::kernels::convert(ctx, as_tensor(widened), as_tensor(low, type, {V, C}));
    for (int begin : {0, 1}) {  // the whole table, and a vocabulary slice of rows [1, 4)
      const int rows = V - begin;
      trident::kernels::embedding_forward(ctx, as_tensor(from_low), as_tensor(tokens, {B, T}),
                                          as_tensor(low, type, {V, C}).elements(begin * C, rows * C).reshaped(Shape{rows, C}),
                                          begin);
      trident::kernels::embedding_forward(ctx, as_tensor(from_f32), as_tensor(tokens, {B, T}),
                                          view(widened.data() + begin * C, Shape{rows, C}), begin);
      BOOST_TEST(from_low == from_f32, dtype_name(type) << " from row " << begin);
    }
    BOOST_TEST(widened != wte);  // the table was rounded: the comparison reads the 16-bit values
  }
}

BOOST_AUTO_TEST_CASE(embeddings_forward_and_backward) {
  const int B = 2, T = 4, C = 6, V = 5;
  const std::vector<int32_t> tokens = {1, 3, 1, 4, 0, 1, 2, 1};  // repeats: gradient sums
  auto wte = random_vector(V * C, 80), wpe = random_vector(T * C, 81);
  auto encode = [&](std::vector<float>& out, int begin, int rows) {
    trident::kernels::embedding_forward(ctx, as_tensor(out), as_tensor(tokens, {B, T}),
                                        view(wte.data() + begin * C, Shape{rows, C}), begin);
    trident::kernels::positions_forward(ctx, as_tensor(out, {B, T, C}), as_tensor(wpe));
  };
  std::vector<float> out(B * T * C);
  encode(out, 0, V);
  std::vector<double> expected(out.size());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c)
        expected[(b * T + t) * C + c] = static_cast<double>(wte[tokens[b * T + t] * C + c]) + wpe[t * C + c];
  expect_close(out, expected, 1e-6, 1e-6, "embedding forward");
  // A vocabulary slice: rows [2, 5) only; the tokens outside it contribute nothing.
  std::vector<float> part(B * T * C);
  encode(part, 2, 3);
  for (int n = 0; n < B * T; ++n)
    for (int c = 0; c < C; ++c) {
      const double want = (tokens[n] >= 2 ? wte[tokens[n] * C + c] : 0.0) + wpe[(n % T) * C + c];
      BOOST_REQUIRE_CLOSE(part[n * C + c] + 1.0, want + 1.0, 1e-4);
    }
  const auto upstream = random_vector(out.size(), 82);
  std::vector<float> dwte(wte.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  trident::kernels::embedding_backward(ctx, as_tensor(dwte, {V, C}), as_tensor(upstream), as_tensor(tokens), 0);
  trident::kernels::positions_backward(ctx, as_tensor(dwpe), as_tensor(upstream, {B, T, C}));
  auto loss = [&] {
    std::vector<float> o(B * T * C);
    encode(o, 0, V);
    return weighted_sum(o, upstream);
  };
  check_gradient(wte, dwte, loss, "embedding dwte", 1e-2f, 2e-2, 1e-3, 30);
  check_gradient(wpe, dwpe, loss, "positions dwpe", 1e-2f, 2e-2, 1e-3, 24);
}

namespace {

// The cross-entropy pieces over the whole vocabulary of one rank.
void cross_entropy(std::vector<float>& losses, std::vector<float>& normalizers,
                   const std::vector<float>& logits, const std::vector<int32_t>& targets, int N,
                   int V, int Vp) {
  std::vector<float> maxes(N), sums(N), target_logits(N);
  const Tensor rows = as_tensor(logits, {N, Vp});
  trident::kernels::crossentropy_row_max(ctx, as_tensor(maxes), rows, V);
  trident::kernels::crossentropy_row_sums(ctx, as_tensor(sums), as_tensor(target_logits), rows, as_tensor(maxes),
                                          as_tensor(targets), 0, V);
  trident::kernels::crossentropy_losses(ctx, as_tensor(losses), as_tensor(normalizers), as_tensor(maxes),
                                        as_tensor(sums), as_tensor(target_logits));
}

}  // namespace

BOOST_AUTO_TEST_CASE(crossentropy_forward_and_backward_ignore_padding) {
  const int N = 4, V = 7, Vp = 9;
  auto logits = random_vector(N * Vp, 90, 3.0f);
  const std::vector<int32_t> targets = {0, 6, 3, 3};
  std::vector<float> losses(N), normalizers(N);
  cross_entropy(losses, normalizers, logits, targets, N, V, Vp);
  std::vector<double> expected(N);
  for (int n = 0; n < N; ++n) {
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[n * Vp + i]));
    expected[n] = std::log(sum) - logits[n * Vp + targets[n]];
  }
  expect_close(losses, expected, 1e-5, 1e-4, "cross-entropy forward");
  const float scale = 1.0f / N;
  std::vector<float> dlogits(logits.size(), 5.0f);
  trident::kernels::crossentropy_backward(ctx, as_tensor(dlogits), as_tensor(logits, {N, Vp}), as_tensor(normalizers),
                                          as_tensor(targets), 0, scale, V);
  auto loss = [&] {
    std::vector<float> l(N), z(N);
    cross_entropy(l, z, logits, targets, N, V, Vp);
    double mean = 0;
    for (float x : l) mean += x * scale;
    return mean;
  };
  check_gradient(logits, dlogits, loss, "cross-entropy dlogits", 1e-2f, 2e-2, 1e-3, 36);
  for (int n = 0; n < N; ++n)
    for (int i = V; i < Vp; ++i) BOOST_TEST(dlogits[n * Vp + i] == 0.0f);
  // In place, as the model uses it.
  std::vector<float> in_place = logits;
  trident::kernels::crossentropy_backward(ctx, as_tensor(in_place), as_tensor(in_place, {N, Vp}),
                                          as_tensor(normalizers), as_tensor(targets), 0, scale, V);
  BOOST_TEST(in_place == dlogits);
  // Written in 16 bits (a 16-bit model's classifier: what its GEMMs read): the f32 values rounded,
  // the padding 0; never into the logits' own memory.
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<trident::kernels::low16> low(logits.size(), 0xFFFF), expected(logits.size());
    trident::kernels::crossentropy_backward(ctx, view(low.data(), type, low.size()).reshaped({N, Vp}),
                                            as_tensor(logits, {N, Vp}), as_tensor(normalizers), as_tensor(targets), 0,
                                            scale, V);
    trident::kernels::convert(ctx, view(expected.data(), type, expected.size()), as_tensor(dlogits));
    BOOST_TEST(low == expected, boost::test_tools::per_element());
    BOOST_CHECK_THROW(trident::kernels::crossentropy_backward(ctx, view(in_place.data(), type, in_place.size()),
                                                              as_tensor(in_place, {N, Vp}), as_tensor(normalizers),
                                                              as_tensor(targets), 0, scale, V),
                      std::logic_error);
  }
}

// The loss and its gradient in one operation (rows of the whole vocabulary) are the pieces in turn,
// bit for bit: losses, log-normalizers and dlogits in f32 (apart and in place) and in 16 bits, in
// both arithmetics; a 16-bit dlogits in the logits' own memory is refused.
BOOST_AUTO_TEST_CASE(crossentropy_forward_backward_is_its_pieces) {
  const int N = 5, V = 37, Vp = 40;
  const auto logits = random_vector(N * Vp, 91, 4.0f);
  const std::vector<int32_t> targets = {0, 36, 5, 5, 17};
  const float scale = 0.125f;
  const Shape rows{N, Vp};
  for (auto arithmetic : {trident::kernels::Arithmetic::native, trident::kernels::Arithmetic::portable}) {
    Context c;
    c.arithmetic = arithmetic;
    std::vector<float> maxes(N), sums(N), target_logits(N), losses(N), normalizers(N), dlogits(logits.size());
    trident::kernels::crossentropy_row_max(c, as_tensor(maxes), as_tensor(logits, rows), V);
    trident::kernels::crossentropy_row_sums(c, as_tensor(sums), as_tensor(target_logits), as_tensor(logits, rows),
                                            as_tensor(maxes), as_tensor(targets), 0, V);
    trident::kernels::crossentropy_losses(c, as_tensor(losses), as_tensor(normalizers), as_tensor(maxes), as_tensor(sums),
                                          as_tensor(target_logits));
    trident::kernels::crossentropy_backward(c, as_tensor(dlogits), as_tensor(logits, rows), as_tensor(normalizers),
                                            as_tensor(targets), 0, scale, V);
    std::vector<float> fused_losses(N), fused_normalizers(N), in_place = logits;
    trident::kernels::crossentropy_forward_backward(c, as_tensor(fused_losses), as_tensor(fused_normalizers),
                                                    as_tensor(in_place), as_tensor(in_place, rows), as_tensor(targets),
                                                    scale, V);
    BOOST_TEST(fused_losses == losses, boost::test_tools::per_element());
    BOOST_TEST(fused_normalizers == normalizers, boost::test_tools::per_element());
    BOOST_TEST(in_place == dlogits, boost::test_tools::per_element());
    for (DType type : {DType::bf16, DType::fp16}) {
      std::vector<trident::kernels::low16> expected(logits.size()), low(logits.size(), 0xFFFF);
      trident::kernels::crossentropy_backward(c, view(expected.data(), type, expected.size()).reshaped(rows),
                                              as_tensor(logits, rows), as_tensor(normalizers), as_tensor(targets), 0,
                                              scale, V);
      std::fill(fused_losses.begin(), fused_losses.end(), 0.0f);
      trident::kernels::crossentropy_forward_backward(c, as_tensor(fused_losses), as_tensor(fused_normalizers),
                                                      view(low.data(), type, low.size()).reshaped(rows),
                                                      as_tensor(logits, rows), as_tensor(targets), scale, V);
      BOOST_TEST(low == expected, boost::test_tools::per_element());
      BOOST_TEST(fused_losses == losses, boost::test_tools::per_element());
      std::vector<float> own = logits;
      BOOST_CHECK_THROW(trident::kernels::crossentropy_forward_backward(
                            c, as_tensor(fused_losses), as_tensor(fused_normalizers),
                            view(own.data(), type, own.size()), as_tensor(own, rows), as_tensor(targets), scale, V),
                        std::logic_error);
    }
  }
}

// A 16-bit loss gradient's f32 rows are each thread's part of a tracked workspace, kept at the
// largest need: a vocabulary 1,000 rows wider than any other test's grows it by 1,000 floats a
// thread (omp_get_max_threads(): what the memory model counts), a narrower one not at all.
BOOST_AUTO_TEST_CASE(crossentropy_16_bit_rows_are_a_tracked_workspace) {
  const int N = 3, wide = 1 << 17;
  auto grow = [&](int Vp) {
    const std::vector<float> logits(size_t(N) * Vp, 0.5f), normalizers(N, 1.0f);
    const std::vector<int32_t> targets = {0, 1, 2};
    std::vector<trident::kernels::low16> low(logits.size());
    const int64_t before = tracked(MemoryCategory::Workspace);
    trident::kernels::crossentropy_backward(ctx, view(low.data(), DType::bf16, low.size()).reshaped({N, Vp}),
                                            as_tensor(logits, {N, Vp}), as_tensor(normalizers), as_tensor(targets), 0,
                                            1.0f, Vp);
    return tracked(MemoryCategory::Workspace) - before;
  };
  grow(wide);
  BOOST_TEST(grow(wide + 1000) == int64_t(omp_get_max_threads()) * 1000 * int64_t(sizeof(float)));
  BOOST_TEST(grow(wide) == 0);
}

BOOST_AUTO_TEST_CASE(adamw_matches_reference_formula) {
  auto [p, g, m, v] = random_adamw_state(50, 100);
  std::vector<double> expected(50);
  const double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  const int t = 3;
  for (int i = 0; i < 50; ++i) {
    const double mi = b1 * m[i] + (1 - b1) * g[i], vi = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const double mhat = mi / (1 - std::pow(b1, t)), vhat = vi / (1 - std::pow(b2, t));
    expected[i] = p[i] - lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
  }
  for (float& x : g) x *= 2.0f;  // and the clipping factor undoes it
  trident::kernels::adamw_update(ctx, as_tensor(p), Tensor{}, as_tensor(g), as_tensor(m), as_tensor(v), {{0, 50, true}},
                                 lr, b1, b2, eps, wd, t, 0.5f);
  expect_close(p, expected, 1e-6, 1e-3, "adamw");
}

// Segments in one call: each as its own call with its decay, bit for bit; what no segment lists
// untouched.
BOOST_AUTO_TEST_CASE(adamw_segments_update_as_separate_calls) {
  const size_t n = 700;
  auto [p, g, m, v] = random_adamw_state(n, 108);
  auto p2 = p, m2 = m, v2 = v;
  const std::vector<trident::kernels::AdamWSegment> segments = {{0, 300, true}, {300, 1, false}, {301, 0, true},
                                                                {310, 390, false}};
  trident::kernels::adamw_update(ctx, as_tensor(p), Tensor{}, as_tensor(g), as_tensor(m), as_tensor(v), segments, 1e-3f,
                                 0.9f, 0.95f, 1e-8f, 0.1f, 2, 1.0f);
  for (const auto& s : segments) {
    const size_t b = size_t(s.begin), c = size_t(s.count);
    auto part = [&](std::vector<float>& x) { return view(x.data() + b, c); };
    trident::kernels::adamw_update(ctx, part(p2), Tensor{}, view(g.data() + b, c), part(m2), part(v2),
                                   {{0, s.count, s.decay}}, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 2, 1.0f);
  }
  BOOST_TEST((p == p2 && m == m2 && v == v2));
  BOOST_TEST(p[305] == random_vector(n, 108)[305]);  // in no segment
}

// The fused 16-bit copy: the same parameters and moments as without it, and the copy what
// convert makes of them, bit for bit, in bf16 and fp16.
BOOST_AUTO_TEST_CASE(adamw_writes_the_16_bit_copy_convert_would) {
  const size_t n = 1003;
  for (DType type : {DType::bf16, DType::fp16}) {
    auto [p, g, m, v] = random_adamw_state(n, 104);
    auto p2 = p, m2 = m, v2 = v;
    std::vector<uint16_t> fused(n), converted(n);
    const std::vector<trident::kernels::AdamWSegment> all = {{0, int64_t(n), true}};
    trident::kernels::adamw_update(ctx, as_tensor(p), as_tensor(fused, type, {int64_t(n)}), as_tensor(g), as_tensor(m),
                                   as_tensor(v), all, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4, 0.7f);
    trident::kernels::adamw_update(ctx, as_tensor(p2), Tensor{}, as_tensor(g), as_tensor(m2), as_tensor(v2), all, 1e-3f,
                                   0.9f, 0.95f, 1e-8f, 0.1f, 4, 0.7f);
    trident::kernels::convert(ctx, as_tensor(converted, type, {int64_t(n)}), as_tensor(p2));
    BOOST_TEST(p == p2, dtype_name(type));
    BOOST_TEST((m == m2 && v == v2), dtype_name(type));
    BOOST_TEST(fused == converted, dtype_name(type));
  }
}

BOOST_AUTO_TEST_CASE(sum_of_squares_is_exact_enough_and_thread_independent) {
  auto x = random_vector(100003, 110);
  double expected = 0;
  for (float v : x) expected += static_cast<double>(v) * v;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = trident::kernels::sums_of_squares(ctx, {as_tensor(x)})[0];
  omp_set_num_threads(2);
  const double two = trident::kernels::sums_of_squares(ctx, {as_tensor(x)})[0];
  omp_set_num_threads(threads);
  BOOST_TEST(std::fabs(one - expected) / expected < 1e-12);
  BOOST_TEST(one == two);  // bitwise
}

// Parts in one call (chunks of several parts in one parallel loop) sum as each part alone, bit
// for bit, empty and sub-chunk parts included.
BOOST_AUTO_TEST_CASE(sums_of_squares_of_parts_equal_each_part_alone) {
  const auto x = random_vector(3 * trident::kernels::kSumOfSquaresChunk + 4567, 111);
  const size_t cuts[] = {0, 10, 10, trident::kernels::kSumOfSquaresChunk + 3, 2 * trident::kernels::kSumOfSquaresChunk,
                         x.size()};
  std::vector<Tensor> parts;
  for (size_t i = 0; i + 1 < std::size(cuts); ++i) parts.push_back(view(x.data() + cuts[i], cuts[i + 1] - cuts[i]));
  const std::vector<double> together = trident::kernels::sums_of_squares(ctx, parts);
  BOOST_REQUIRE_EQUAL(together.size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i)
    BOOST_TEST(together[i] == trident::kernels::sums_of_squares(ctx, {parts[i]})[0], "part " << i);
  BOOST_TEST(together[1] == 0.0);  // the empty part
  BOOST_TEST(trident::kernels::sums_of_squares(ctx, {}).empty());
}

// The step's decisions on the device (issue 30, item 4): the grouped sums of squares are the
// host's sums added by group in part order; the loss sum the micro-batches' float means added in
// order; step_control's norm, clip factor, update scale and skip flag; AdamW reading the scale
// and the flag from memory (a skip leaves everything as it was).
BOOST_AUTO_TEST_CASE(sums_of_squares_into_groups_the_host_sums) {
  const auto x = random_vector(2 * trident::kernels::kSumOfSquaresChunk + 77, 112);
  std::vector<Tensor> parts = {view(x.data(), 100), view(x.data() + 100, 9000), view(x.data() + 9100, 0),
                               view(x.data() + 9100, x.size() - 9100)};
  const std::vector<int> group = {1, 0, 1, 1};
  const std::vector<double> each = trident::kernels::sums_of_squares(ctx, parts);
  std::vector<double> out(2, -1.0);
  trident::kernels::sums_of_squares_into(ctx, as_tensor(out), parts, group);
  BOOST_TEST(out[0] == each[1]);
  BOOST_TEST(out[1] == ((0.0 + each[0]) + each[2]) + each[3]);  // in part order, from 0
  BOOST_CHECK_THROW(trident::kernels::sums_of_squares_into(ctx, as_tensor(out), parts, {0, 2, 0, 0}),
                    std::logic_error);  // a group out has no place for
}

BOOST_AUTO_TEST_CASE(step_control_decides_as_the_host_did) {
  const std::vector<double> sums = {1234.5678, 987.125, 31.0};
  std::vector<double> loss(1, -1.0);
  trident::kernels::mean_losses_into(ctx, as_tensor(loss), as_tensor(sums), 64.0);
  double expected = 0.0;
  for (double s : sums) expected += static_cast<float>(s / 64.0);
  BOOST_TEST(loss[0] == expected);
  using trident::kernels::kStepScalars;
  auto control = [&](double loss_sum, double split, double replicated, float clip, double scale) {
    std::vector<double> s(kStepScalars, 0.0);
    s[trident::kernels::kLossSum] = loss_sum, s[trident::kernels::kSquaresSplit] = split;
    s[trident::kernels::kSquaresReplicated] = replicated;
    trident::kernels::step_control(ctx, as_tensor(s), clip, scale, 8.0);
    return s;
  };
  std::vector<double> s = control(20.0, 9.0, 16.0, 1.0f, 1.0);  // norm 5, clipped to 1
  BOOST_TEST(s[trident::kernels::kLoss] == 2.5);
  BOOST_TEST(s[trident::kernels::kGradNorm] == 5.0);
  BOOST_TEST(s[trident::kernels::kUpdateScale] == static_cast<float>(1.0f / 5.0f));
  BOOST_TEST(s[trident::kernels::kSkipStep] == 0.0);
  s = control(20.0, 9.0, 16.0, 0.0f, 4.0);  // no clipping; fp16's scale 4 divided out
  BOOST_TEST(s[trident::kernels::kGradNorm] == 1.25);
  BOOST_TEST(s[trident::kernels::kUpdateScale] == 0.25);
  BOOST_TEST(control(std::nan(""), 1.0, 1.0, 1.0f, 1.0)[trident::kernels::kSkipStep] == 1.0);
  BOOST_TEST(control(1.0, INFINITY, 1.0, 1.0f, 1.0)[trident::kernels::kSkipStep] == 1.0);
  BOOST_TEST(control(1e300, 1.0, 1.0, 1.0f, 1.0)[trident::kernels::kSkipStep] == 1.0);  // the float loss overflows
}

BOOST_AUTO_TEST_CASE(adamw_reads_its_scale_and_skip_from_memory) {
  auto [p, g, m, v] = random_adamw_state(301, 113);
  auto p2 = p, m2 = m, v2 = v, p3 = p, m3 = m, v3 = v;
  const std::vector<trident::kernels::AdamWSegment> all = {{0, 301, true}};
  trident::kernels::adamw_update(ctx, as_tensor(p), Tensor{}, as_tensor(g), as_tensor(m), as_tensor(v), all, 1e-3f,
                                 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.375f);
  std::vector<double> go = {0.375, 0.0}, skip = {0.375, 1.0};
  trident::kernels::adamw_update(ctx, as_tensor(p2), Tensor{}, as_tensor(g), as_tensor(m2), as_tensor(v2), all, 1e-3f,
                                 0.9f, 0.95f, 1e-8f, 0.1f, 3, 99.0f, as_tensor(go));
  BOOST_TEST((p2 == p && m2 == m && v2 == v));  // the factor from memory, not the argument
  const auto before = p3;
  trident::kernels::adamw_update(ctx, as_tensor(p3), Tensor{}, as_tensor(g), as_tensor(m3), as_tensor(v3), all, 1e-3f,
                                 0.9f, 0.95f, 1e-8f, 0.1f, 3, 1.0f, as_tensor(skip));
  BOOST_TEST((p3 == before && p3 != p));
}

BOOST_AUTO_TEST_CASE(vectorizable_exp_is_accurate) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.001f) {
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(trident::kernels::vexp(x) - exact) / exact);
  }
  BOOST_TEST(worst < 5e-7, "worst relative error " << worst);
  BOOST_TEST(trident::kernels::vexp(-1000.0f) >= 0.0f);
  BOOST_TEST(std::isfinite(trident::kernels::vexp(1000.0f)));
  BOOST_TEST(trident::kernels::vexp(0.0f) == 1.0f);
}

BOOST_AUTO_TEST_CASE(openmp_alternatives_agree_with_the_kernels_in_use) {
  const int N = 7, C = 24;
  auto x = random_vector(N * C, 120, 2.0f), w = random_vector(C, 121), b = random_vector(C, 122);
  const auto dy = random_vector(N * C, 123);
  std::vector<float> y1(N * C), y2(N * C), mean1(N), var(N), mean2(N), rstd(N);
  trident::kernels::layernorm_forward(ctx, as_tensor(y1), as_tensor(mean1), as_tensor(var), as_tensor(x, {N, C}),
                                      as_tensor(w), as_tensor(b));
  trident::kernels::openmp::layernorm_forward(y2.data(), mean2.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  expect_close(y2, std::vector<double>(y1.begin(), y1.end()), 1e-4, 1e-3, "layernorm forward");
  std::vector<float> dx1(N * C, 0.f), dw1(C, 0.f), db1(C, 0.f), dx2(N * C, 0.f), dw2(C, 0.f), db2(C, 0.f);
  trident::kernels::layernorm_backward(ctx, as_tensor(dx1), as_tensor(dw1), as_tensor(db1), as_tensor(dy),
                                       as_tensor(x, {N, C}), as_tensor(w), as_tensor(b), as_tensor(mean1),
                                       as_tensor(var));
  trident::kernels::openmp::layernorm_backward(dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(),
                                      mean2.data(), rstd.data(), N, C);
  expect_close(dx2, std::vector<double>(dx1.begin(), dx1.end()), 1e-4, 1e-3, "layernorm dinp");
  expect_close(dw2, std::vector<double>(dw1.begin(), dw1.end()), 1e-4, 1e-3, "layernorm dweight");
  expect_close(db2, std::vector<double>(db1.begin(), db1.end()), 1e-4, 1e-3, "layernorm dbias");
  std::vector<float> g1(N * C), g2(N * C);
  trident::kernels::gelu_forward(ctx, as_tensor(g1), as_tensor(x));
  trident::kernels::openmp::gelu_forward(g2.data(), x.data(), g2.size());
  // oneDNN's tail against ours: the floor of gelu_forward_and_backward.
  expect_close(g2, std::vector<double>(g1.begin(), g1.end()), 1e-4, 1e-2, "gelu forward");
}

namespace {

// A check that the logic_error names the operation and the argument: "kernels::OP: ARG ...".
auto names(const std::string& op, const std::string& argument) {
  return [prefix = "kernels::" + op + ": " + argument + " "](const std::logic_error& e) {
    BOOST_TEST_MESSAGE(e.what());
    return std::string(e.what()).rfind(prefix, 0) == 0;
  };
}

}  // namespace

// kernels::* checks the tensors against ops.inc before the backend runs: an extent that does not
// agree with the others is a programming error, named, and nothing is written.
BOOST_AUTO_TEST_CASE(tensors_of_the_wrong_extent_throw_before_running) {
  const int N = 4, C = 8;
  const auto x = random_vector(N * C, 130), w = random_vector(C, 131), b = random_vector(C + 1, 132);
  const std::vector<float> untouched(N * C, 7.0f);
  std::vector<float> y = untouched, mean(N), variance(N);
  BOOST_CHECK_EXCEPTION(trident::kernels::layernorm_forward(ctx, as_tensor(y), as_tensor(mean), as_tensor(variance),
                                                            as_tensor(x, {N, C}), as_tensor(w), as_tensor(b)),
                        std::logic_error, names("layernorm_forward", "bias"));
  BOOST_TEST(y == untouched);
  // w (3, 5) against x (4, 8): K differs.
  const auto w35 = random_vector(3 * 5, 133);
  BOOST_CHECK_EXCEPTION(trident::kernels::linear_forward(ctx, as_tensor(y, {N, C}), as_tensor(x, {N, C}),
                                                         as_tensor(w35, {3, 5}), Tensor{}),
                        std::logic_error, names("linear_forward", "w"));
  // A flat qkv: attention needs (B, T, 3C) to know B and T.
  std::vector<float> out(2 * 4 * 8), att(2 * 2 * 4 * 4);
  const auto qkv = random_vector(2 * 4 * 3 * 8, 134);
  BOOST_CHECK_EXCEPTION(trident::kernels::attention_forward(ctx, as_tensor(out), as_tensor(att), as_tensor(qkv), 2),
                        std::logic_error, names("attention_forward", "qkv"));
  // b of (K + 1, N) against a (M, K).
  const auto a = random_vector(3 * 4, 135), b_wrong = random_vector(5 * 2, 136);
  std::vector<float> c(3 * 2);
  BOOST_CHECK_EXCEPTION(trident::kernels::batched_matmul(ctx, as_tensor(c, {3, 2}), as_tensor(a, {3, 4}),
                                                         as_tensor(b_wrong, {5, 2}), false, false, false),
                        std::logic_error, names("batched_matmul", "b"));
  // More valid columns than logits has.
  const auto logits = random_vector(N * C, 137);
  BOOST_CHECK_EXCEPTION(trident::kernels::crossentropy_row_max(ctx, as_tensor(mean), as_tensor(logits, {N, C}), C + 1),
                        std::logic_error, names("crossentropy_row_max", "valid"));
}

BOOST_AUTO_TEST_CASE(tensors_of_the_wrong_dtype_throw_before_running) {
  const auto x = random_vector(64, 140);
  std::vector<int32_t> ints(64, 3);
  BOOST_CHECK_EXCEPTION(trident::kernels::gelu_forward(ctx, as_tensor(ints), as_tensor(x)), std::logic_error,
                        names("gelu_forward", "out"));
  BOOST_TEST(ints == std::vector<int32_t>(64, 3));
  // Targets as floats instead of token ids.
  const int N = 4, V = 16;
  const auto logits = random_vector(N * V, 141), as_floats = random_vector(N, 142);
  std::vector<float> dlogits(N * V), normalizers(N);
  BOOST_CHECK_EXCEPTION(trident::kernels::crossentropy_backward(ctx, as_tensor(dlogits), as_tensor(logits, {N, V}),
                                                                as_tensor(normalizers), as_tensor(as_floats), 0, 1.0f,
                                                                V),
                        std::logic_error, names("crossentropy_backward", "targets"));
  // bf16 operands need a bf16 dy_low for their GEMMs: an empty one is an error, not a skip.
  const std::vector<uint16_t> x16(4 * 8), w16(3 * 8);
  std::vector<float> dw(3 * 8), dy(4 * 3);
  BOOST_CHECK_EXCEPTION(trident::kernels::linear_backward(ctx, Tensor{}, as_tensor(dw), Tensor{}, as_tensor(dy),
                                                          Tensor{}, as_tensor(x16, DType::bf16, {4, 8}),
                                                          as_tensor(w16, DType::bf16, {3, 8})),
                        std::logic_error, names("linear_backward", "dy_low"));
  // x and w of two types.
  BOOST_CHECK_EXCEPTION(trident::kernels::linear_forward(ctx, as_tensor(dy, {4, 3}),
                                                         as_tensor(x16, DType::bf16, {4, 8}),
                                                         as_tensor(w16, DType::fp16, {3, 8}), Tensor{}),
                        std::logic_error, names("linear_forward", "w"));
}

BOOST_AUTO_TEST_SUITE_END()
