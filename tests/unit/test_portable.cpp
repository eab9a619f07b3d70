// kernels.arithmetic = portable (kernels/cpu/portable.hpp): the fixed-order kernels give the
// right values (against double references and finite differences), their sums run in the
// stated order (bit for bit against the same sums written out here), the bits do not depend
// on the thread count, and no oneDNN primitive is created on the way.
#include <omp.h>

#include <cmath>
#include <cstring>

#include "kernel_check.hpp"
#include "kernels/common/low16.hpp"
#include "kernels/kernels.hpp"

using namespace trident;
using namespace trident::testing;
using kernels::Context;

namespace {

Context portable_context() {
  Context ctx;
  ctx.arithmetic = kernels::Arithmetic::portable;
  return ctx;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// y = x wᵀ + b, each element summed over k in turn in float, then the bias: the stated order.
std::vector<float> linear_in_order(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b, int M, int K, int N) {
  std::vector<float> y(static_cast<size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) sum += x[m * K + k] * w[n * K + k];
      y[m * N + n] = sum + b[n];
    }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(portable)

BOOST_AUTO_TEST_CASE(linear_forward_sums_each_element_over_k_in_turn) {
  Context ctx = portable_context();
  // N = 150 spans three column blocks (64, 64, 22): the partial block as well.
  const int M = 7, K = 131, N = 150;
  auto x = random_vector(M * K, 1), w = random_vector(N * K, 2), b = random_vector(N, 3);
  std::vector<float> y(M * N);
  kernels::linear_forward(ctx, as_tensor(y), as_tensor(x, {M, K}), as_tensor(w, {N, K}), as_tensor(b));
  BOOST_TEST(same_bits(y, linear_in_order(x, w, b, M, K, N)));
}

BOOST_AUTO_TEST_CASE(gemms_agree_with_native_and_create_no_onednn_primitive) {
  Context ctx = portable_context(), native;
  const int batch = 3, M = 5, N = 70, K = 9;
  for (int variant = 0; variant < 8; ++variant) {
    const bool ta = variant & 1, tb = variant & 2, acc = variant & 4;
    auto a = random_vector(batch * M * K, 10 + variant), b = random_vector(batch * K * N, 20 + variant);
    auto ours = random_vector(batch * M * N, 30 + variant), theirs = ours;
    std::vector<double> expected(ours.size());
    const Tensor a_t = as_tensor(a, {batch, ta ? K : M, ta ? M : K});
    const Tensor b_t = as_tensor(b, {batch, tb ? N : K, tb ? K : N});
    kernels::batched_matmul(ctx, as_tensor(ours, {batch, M, N}), a_t, b_t, ta, tb, acc);
    kernels::batched_matmul(native, as_tensor(theirs, {batch, M, N}), a_t, b_t, ta, tb, acc);
    for (size_t i = 0; i < theirs.size(); ++i) expected[i] = theirs[i];
    expect_close(ours, expected, 1e-4, 1e-2, "portable batched matmul variant " + std::to_string(variant));
  }
  const int64_t after_native = kernels::gemm_primitives_created();
  std::vector<float> c(static_cast<size_t>(batch) * M * N);
  auto a = random_vector(batch * M * K, 40), b = random_vector(batch * K * N, 41);
  kernels::batched_matmul(ctx, as_tensor(c, {batch, M, N}), as_tensor(a, {batch, M, K}), as_tensor(b, {batch, K, N}),
                          false, false, false);
  kernels::prepare_linear(ctx, kernels::Precision::fp32, 64, 32, 96, true);
  kernels::prepare_attention(ctx, kernels::Precision::bf16, 2, 16, 32, 4);
  BOOST_TEST(kernels::gemm_primitives_created() == after_native);  // the portable calls created none
}

BOOST_AUTO_TEST_CASE(bf16_operands_are_widened_exactly) {
  Context ctx = portable_context();
  const int M = 4, K = 33, N = 65;
  auto x = random_vector(M * K, 50), w = random_vector(N * K, 51), b = random_vector(N, 52);
  std::vector<kernels::bf16> x16(x.size()), w16(w.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = kernels::bf16_widen(x16[i] = kernels::bf16_round(x[i]));
  for (size_t i = 0; i < w.size(); ++i) w[i] = kernels::bf16_widen(w16[i] = kernels::bf16_round(w[i]));
  std::vector<float> y(M * N);
  kernels::linear_forward(ctx, as_tensor(y), as_tensor(x16, DType::bf16, {M, K}), as_tensor(w16, DType::bf16, {N, K}),
                          as_tensor(b));
  BOOST_TEST(same_bits(y, linear_in_order(x, w, b, M, K, N)));
  BOOST_TEST(!kernels::widens_low16(ctx, kernels::Precision::bf16));  // no workspace: widened as read
}

BOOST_AUTO_TEST_CASE(linear_backward_matches_finite_differences) {
  Context ctx = portable_context();
  const int M = 6, K = 5, N = 7;
  auto x = random_vector(M * K, 4), w = random_vector(N * K, 5), b = random_vector(N, 6);
  const auto upstream = random_vector(M * N, 7);
  std::vector<float> dx(M * K), dw(N * K, 0.0f), db(N, 0.0f);
  kernels::linear_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(db), as_tensor(upstream), Tensor{},
                           as_tensor(x, {M, K}), as_tensor(w, {N, K}));
  auto loss = [&] {
    std::vector<float> y(M * N);
    kernels::linear_forward(ctx, as_tensor(y), as_tensor(x, {M, K}), as_tensor(w, {N, K}), as_tensor(b));
    return weighted_sum(y, upstream);
  };
  check_gradient(x, dx, loss, "portable linear dx");
  check_gradient(w, dw, loss, "portable linear dw");
  check_gradient(b, db, loss, "portable linear dbias");
}

BOOST_AUTO_TEST_CASE(layernorm_forward_and_backward) {
  Context ctx = portable_context();
  const int N = 5, C = 16;
  auto x = random_vector(N * C, 40, 2.0f), w = random_vector(C, 41), b = random_vector(C, 42);
  std::vector<float> y(N * C), mean(N), variance(N);
  kernels::layernorm_forward(ctx, as_tensor(y), as_tensor(mean), as_tensor(variance), as_tensor(x, {N, C}),
                             as_tensor(w), as_tensor(b));
  const std::vector<double> expected = layernorm_reference(x, w, b, N, C);
  expect_close(y, expected, 1e-5, 1e-3, "portable layernorm forward");
  const auto upstream = random_vector(N * C, 43);
  const std::vector<float> dx_base = random_vector(N * C, 44), dw_base = random_vector(C, 45);
  std::vector<float> dx = dx_base, dw = dw_base, db(C, 0.0f);  // accumulates onto what is there
  kernels::layernorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(db), as_tensor(upstream),
                              as_tensor(x, {N, C}), as_tensor(w), as_tensor(b), as_tensor(mean), as_tensor(variance));
  for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx_base[i];
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw_base[i];
  auto loss = [&] {
    std::vector<float> out(N * C), m(N), r(N);
    kernels::layernorm_forward(ctx, as_tensor(out), as_tensor(m), as_tensor(r), as_tensor(x, {N, C}), as_tensor(w),
                               as_tensor(b));
    return weighted_sum(out, upstream);
  };
  check_gradient(x, dx, loss, "portable layernorm dinp", 1e-2f, 3e-2);
  check_gradient(w, dw, loss, "portable layernorm dweight");
  check_gradient(b, db, loss, "portable layernorm dbias");
}

BOOST_AUTO_TEST_CASE(gelu_forward_matches_the_tanh_form) {
  Context ctx = portable_context();
  auto x = random_vector(300, 50, 4.0f);
  std::vector<float> y(x.size());
  kernels::gelu_forward(ctx, as_tensor(y), as_tensor(x));
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    expected[i] = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  expect_close(y, expected, 1e-5, 1e-4, "portable gelu forward");
}

BOOST_AUTO_TEST_CASE(attention_forward_and_backward) {
  Context ctx = portable_context(), native;
  const int B = 2, T = 9, C = 8, NH = 2;
  const size_t probs = static_cast<size_t>(B) * NH * T * T;
  auto qkv = random_vector(B * T * 3 * C, 70);
  std::vector<float> out(B * T * C), att(probs), native_out(out.size()), native_att(probs);
  const Tensor qkv_t = as_tensor(qkv, {B, T, 3 * C});
  kernels::attention_forward(ctx, as_tensor(out), as_tensor(att), qkv_t, NH);
  kernels::attention_forward(native, as_tensor(native_out), as_tensor(native_att), qkv_t, NH);
  expect_close(out, std::vector<double>(native_out.begin(), native_out.end()), 1e-4, 1e-2, "portable attention");
  const auto upstream = random_vector(out.size(), 71);
  std::vector<float> dqkv(qkv.size(), 99.0f), datt(probs);  // dqkv is overwritten
  kernels::attention_backward(ctx, as_tensor(dqkv), as_tensor(datt), as_tensor(upstream), qkv_t, as_tensor(att), NH);
  auto loss = [&] {
    std::vector<float> o(B * T * C), a2(probs);
    kernels::attention_forward(ctx, as_tensor(o), as_tensor(a2), qkv_t, NH);
    return weighted_sum(o, upstream);
  };
  check_gradient(qkv, dqkv, loss, "portable attention dqkv", 1e-2f, 2e-2, 1e-3, 240);
}

BOOST_AUTO_TEST_CASE(results_do_not_depend_on_the_thread_count) {
  Context ctx = portable_context();
  const int M = 33, K = 70, N = 200, C = 96;
  auto x = random_vector(M * K, 80), w = random_vector(N * K, 81), b = random_vector(N, 82);
  auto rows = random_vector(M * C, 83, 3.0f), gamma = random_vector(C, 84), beta = random_vector(C, 85);
  auto upstream = random_vector(M * C, 86);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> y(M * N), ln(M * C), mean(M), variance(M), dx(M * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    kernels::linear_forward(ctx, as_tensor(y), as_tensor(x, {M, K}), as_tensor(w, {N, K}), as_tensor(b));
    kernels::layernorm_forward(ctx, as_tensor(ln), as_tensor(mean), as_tensor(variance), as_tensor(rows, {M, C}),
                               as_tensor(gamma), as_tensor(beta));
    kernels::layernorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(db), as_tensor(upstream),
                                as_tensor(rows, {M, C}), as_tensor(gamma), as_tensor(beta), as_tensor(mean),
                                as_tensor(variance));
    y.insert(y.end(), ln.begin(), ln.end());
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    y.insert(y.end(), db.begin(), db.end());
    return y;
  };
  const int before = omp_get_max_threads();
  const std::vector<float> one = run(1), two = run(2), three = run(3);
  omp_set_num_threads(before);
  BOOST_TEST(same_bits(one, two));
  BOOST_TEST(same_bits(one, three));
}

BOOST_AUTO_TEST_SUITE_END()
