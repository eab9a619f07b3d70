// Llama's kernels on the CPU (kernels/cpu/llama.cpp): each forward against a double-precision
// reference written from the published formulas (RMSNorm: Zhang & Sennrich 2019; rotary
// positions: Su et al. 2021 in Hugging Face's rotate_half layout; SwiGLU: Shazeer 2020; grouped-
// query attention: Ainslie et al. 2023), each backward against central finite differences.
#include <cmath>
#include <vector>

#include "kernel_check.hpp"
#include "kernels/common/llama_math.hpp"
#include "kernels/kernels.hpp"

using namespace trident;
using namespace trident::testing;
using trident::kernels::Context;

namespace {

Context ctx;

}  // namespace

BOOST_AUTO_TEST_SUITE(llama_kernels)

BOOST_AUTO_TEST_CASE(rmsnorm_forward_and_backward) {
  const int N = 6, C = 24;
  const float eps = 1e-5f;
  auto x = random_vector(N * C, 70, 2.0f), w = random_vector(C, 71);
  std::vector<float> y(N * C), rstd(N);
  kernels::rmsnorm_forward(ctx, as_tensor(y), as_tensor(rstd), as_tensor(x, {N, C}), as_tensor(w), eps);
  std::vector<double> expected(N * C);
  for (int n = 0; n < N; ++n) {
    double squares = 0;
    for (int c = 0; c < C; ++c) squares += double(x[n * C + c]) * x[n * C + c];
    const double r = 1.0 / std::sqrt(squares / C + eps);
    for (int c = 0; c < C; ++c) expected[n * C + c] = x[n * C + c] * r * w[c];
  }
  expect_close(y, expected, 1e-5, 1e-3, "rmsnorm forward");
  const auto upstream = random_vector(N * C, 72);
  std::vector<float> dx_base = random_vector(N * C, 73), dw_base = random_vector(C, 74);
  std::vector<float> dx = dx_base, dw = dw_base;  // accumulates onto what is there
  kernels::rmsnorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(upstream), as_tensor(x, {N, C}), as_tensor(w),
                            as_tensor(rstd));
  for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx_base[i];
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw_base[i];
  auto loss = [&] {
    std::vector<float> out(N * C), r(N);
    kernels::rmsnorm_forward(ctx, as_tensor(out), as_tensor(r), as_tensor(x, {N, C}), as_tensor(w), eps);
    return weighted_sum(out, upstream);
  };
  check_gradient(x, dx, loss, "rmsnorm dinp", 1e-2f, 3e-2);
  check_gradient(w, dw, loss, "rmsnorm dweight");
}

// Written in a 16-bit type, the output is the f32 output rounded (kernels::store's), bit for bit,
// with the same rstd.
BOOST_AUTO_TEST_CASE(rmsnorm_writes_16_bit_outputs) {
  const int N = 5, C = 40;
  const auto x = random_vector(N * C, 76, 2.0f), w = random_vector(C, 77);
  std::vector<float> y(N * C), rstd(N);
  kernels::rmsnorm_forward(ctx, as_tensor(y), as_tensor(rstd), as_tensor(x, {N, C}), as_tensor(w), 1e-5f);
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<kernels::low16> expected(y.size()), out(y.size());
    std::vector<float> r(N);
    kernels::store(ctx, view(expected.data(), type, expected.size()), as_tensor(std::vector<float>(y)));
    kernels::rmsnorm_forward(ctx, view(out.data(), type, out.size()), as_tensor(r), as_tensor(x, {N, C}), as_tensor(w),
                             1e-5f);
    BOOST_TEST(out == expected, boost::test_tools::per_element());
    BOOST_TEST(r == rstd, boost::test_tools::per_element());
  }
}

// Backward from a 16-bit model's kept input, widened as read: the f32 backward's results on the
// widened values, bit for bit.
BOOST_AUTO_TEST_CASE(rmsnorm_backward_reads_16_bit_inputs) {
  const int N = 5, C = 40;
  const auto x32 = random_vector(N * C, 176, 2.0f), w = random_vector(C, 177), dout = random_vector(N * C, 178);
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<kernels::low16> x_low(x32.size());
    std::vector<float> x(x32.size()), y(x32.size()), rstd(N);
    kernels::convert(ctx, view(x_low.data(), type, x_low.size()), as_tensor(x32));
    kernels::convert(ctx, as_tensor(x), view(x_low.data(), type, x_low.size()));
    kernels::rmsnorm_forward(ctx, as_tensor(y), as_tensor(rstd), as_tensor(x, {N, C}), as_tensor(w), 1e-5f);
    std::vector<float> dx = random_vector(N * C, 179), dw = random_vector(C, 180), dx16 = dx, dw16 = dw;
    kernels::rmsnorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(dout), as_tensor(x, {N, C}), as_tensor(w),
                              as_tensor(rstd));
    kernels::rmsnorm_backward(ctx, as_tensor(dx16), as_tensor(dw16), as_tensor(dout),
                              view(x_low.data(), type, x_low.size()).reshaped({N, C}), as_tensor(w), as_tensor(rstd));
    BOOST_TEST(dx16 == dx, boost::test_tools::per_element());
    BOOST_TEST(dw16 == dw, boost::test_tools::per_element());
  }
}

// The input gradient's 16-bit copy: dinp rounded, beside the same dinp and dweight, from f32 and
// 16-bit inputs.
BOOST_AUTO_TEST_CASE(rmsnorm_backward_writes_its_input_gradient_in_16_bits) {
  const int N = 5, C = 40;
  const auto x32 = random_vector(N * C, 181, 2.0f), w = random_vector(C, 182), dout = random_vector(N * C, 183);
  std::vector<float> y(N * C), rstd(N);
  kernels::rmsnorm_forward(ctx, as_tensor(y), as_tensor(rstd), as_tensor(x32, {N, C}), as_tensor(w), 1e-5f);
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<kernels::low16> x_low(x32.size());
    kernels::convert(ctx, view(x_low.data(), type, x_low.size()), as_tensor(x32));
    for (const Tensor& inp : {as_tensor(x32, {N, C}), view(x_low.data(), type, x_low.size()).reshaped({N, C})}) {
      std::vector<float> dx = random_vector(N * C, 184), dw(C, 0.5f), dx2 = dx, dw2 = dw;
      std::vector<kernels::low16> copy(N * C, 0xFFFF), expected(N * C);
      kernels::rmsnorm_backward(ctx, as_tensor(dx), as_tensor(dw), as_tensor(dout), inp, as_tensor(w), as_tensor(rstd));
      kernels::rmsnorm_backward(ctx, as_tensor(dx2), as_tensor(dw2), as_tensor(dout), inp, as_tensor(w), as_tensor(rstd),
                                view(copy.data(), type, copy.size()));
      kernels::convert(ctx, view(expected.data(), type, expected.size()), as_tensor(dx));
      BOOST_TEST(dx2 == dx, boost::test_tools::per_element());
      BOOST_TEST(dw2 == dw, boost::test_tools::per_element());
      BOOST_TEST(copy == expected, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(rope_rotates_pairs_and_inverts) {
  const int B = 2, T = 5, Q = 4, KV = 2, hs = 8, width = (Q + 2 * KV) * hs;
  const kernels::RopeFrequencies theta{10000.0f};
  const std::vector<int32_t> positions = {0, 1, 7, 100, 3};  // any positions: context parallelism's chunks
  const auto x = random_vector(B * T * width, 75);
  std::vector<float> y = x;
  kernels::rope(ctx, as_tensor(y, {B, T, width}), as_tensor(positions), Q, KV, theta, false);
  std::vector<double> expected(x.begin(), x.end());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < Q + KV; ++h)  // v (the last KV heads) untouched
        for (int i = 0; i < hs / 2; ++i) {
          const size_t at = (size_t(b) * T + t) * width + h * hs;
          const double angle = positions[t] * std::pow(double(theta.theta), -2.0 * i / hs);
          const double a = x[at + i], c = x[at + hs / 2 + i];
          expected[at + i] = a * std::cos(angle) - c * std::sin(angle);
          expected[at + hs / 2 + i] = c * std::cos(angle) + a * std::sin(angle);
        }
  expect_close(y, expected, 2e-4, 1e-2, "rope forward");  // f32 angles of position 100, as transformers'
  // Backward is the inverse rotation: the gradient of Σ up ⊙ rope(x) is rope⁻¹(up).
  const auto upstream = random_vector(x.size(), 76);
  std::vector<float> dx = upstream;
  kernels::rope(ctx, as_tensor(dx, {B, T, width}), as_tensor(positions), Q, KV, theta, true);
  std::vector<float> xv = x;
  auto loss = [&] {
    std::vector<float> out = xv;
    kernels::rope(ctx, as_tensor(out, {B, T, width}), as_tensor(positions), Q, KV, theta, false);
    return weighted_sum(out, upstream);
  };
  check_gradient(xv, dx, loss, "rope backward", 1e-2f, 2e-2, 1e-3, 200);
  std::vector<float> back = y;  // and rope⁻¹(rope(x)) = x
  kernels::rope(ctx, as_tensor(back, {B, T, width}), as_tensor(positions), Q, KV, theta, true);
  expect_close(back, std::vector<double>(x.begin(), x.end()), 1e-5, 1e-3, "rope inverse");
  // With the 16-bit copy backward's qkv GEMM reads: the same rotation, and every value after it —
  // v's too — rounded; a copy of f32 or of another size refused.
  for (DType type : {DType::bf16, DType::fp16}) {
    std::vector<float> rotated = upstream;
    std::vector<kernels::low16> copy(x.size(), 0xFFFF), expected(x.size());
    kernels::rope(ctx, as_tensor(rotated, {B, T, width}), as_tensor(positions), Q, KV, theta, true,
                  view(copy.data(), type, copy.size()));
    BOOST_TEST(rotated == dx, boost::test_tools::per_element());
    kernels::convert(ctx, view(expected.data(), type, expected.size()), as_tensor(dx));
    BOOST_TEST(copy == expected, boost::test_tools::per_element());
    BOOST_CHECK_THROW(kernels::rope(ctx, as_tensor(rotated, {B, T, width}), as_tensor(positions), Q, KV, theta, true,
                                    view(copy.data(), type, copy.size() - 1)),
                      std::logic_error);
  }
  std::vector<float> f32_copy(x.size());
  BOOST_CHECK_THROW(kernels::rope(ctx, as_tensor(y, {B, T, width}), as_tensor(positions), Q, KV, theta, true,
                                  as_tensor(f32_copy)),
                    std::logic_error);
}

// The rows' cosines and sines, (T, hs/2) each, are a tracked workspace kept at the largest need
// (what the memory model counts): 100 more rows than any other test's grow it by 100·hs floats,
// fewer rows not at all.
BOOST_AUTO_TEST_CASE(rope_tables_are_a_tracked_workspace) {
  const int B = 1, Q = 2, KV = 1, hs = 64, width = (Q + 2 * KV) * hs, longest = 5000;
  auto grow = [&](int T) {
    std::vector<float> qkv(size_t(B) * T * width, 0.5f);
    std::vector<int32_t> positions(T);
    for (int t = 0; t < T; ++t) positions[t] = t;
    const int64_t before = tracked(MemoryCategory::Workspace);
    kernels::rope(ctx, as_tensor(qkv, {B, T, width}), as_tensor(positions), Q, KV, kernels::RopeFrequencies{10000.0f},
                  false);
    return tracked(MemoryCategory::Workspace) - before;
  };
  grow(longest);
  BOOST_TEST(grow(longest + 100) == int64_t(100) * hs * int64_t(sizeof(float)));
  BOOST_TEST(grow(longest) == 0);
}

// Llama 3.1's scaled frequencies against Meta's apply_scaling (llama/model.py) in double: kept
// below a wavelength of original/high, divided by the factor above original/low, interpolated
// between — each region reached by θ = 500000 and a head of 128.
BOOST_AUTO_TEST_CASE(rope_scaling_is_llama_3_1s) {
  const kernels::RopeFrequencies r{500000.0f, 8.0f, 1.0f, 4.0f, 8192.0f};
  const int hs = 128;
  int kept = 0, divided = 0, between = 0;
  for (int i = 0; i < hs / 2; ++i) {
    const double f = std::pow(500000.0, -2.0 * i / hs), wavelength = 2 * M_PI / f;
    double expected = f;
    if (wavelength > 8192.0) expected = f / 8, ++divided;
    else if (wavelength >= 8192.0 / 4) {
      const double smooth = (8192.0 / wavelength - 1) / (4 - 1);
      expected = (1 - smooth) * f / 8 + smooth * f, ++between;
    } else ++kept;
    const double got = kernels::rope_inverse_frequency(i, hs, r);
    BOOST_TEST(std::fabs(got - expected) <= 2e-6 * expected, "pair " << i << ": " << got << " vs " << expected);
    BOOST_TEST(kernels::rope_inverse_frequency(i, hs, kernels::RopeFrequencies{500000.0f}) ==
               static_cast<float>(1.0f / std::pow(500000.0f, 2.0f * i / hs)));
  }
  BOOST_TEST(kept > 0);
  BOOST_TEST(divided > 0);
  BOOST_TEST(between > 0);
  // The kernel rotates by these frequencies: a pair at position 1 turns by exactly f_i.
  const int Q = 1, KV = 1, width = 3 * hs;
  std::vector<float> y(width, 0.0f);
  for (int i = 0; i < hs / 2; ++i) y[i] = 1.0f;  // (1, 0) in every pair of q
  const std::vector<int32_t> one = {1};
  kernels::rope(ctx, as_tensor(y, {1, 1, width}), as_tensor(one), Q, KV, r, false);
  for (int i = 0; i < hs / 2; i += 9)
    BOOST_TEST(std::fabs(std::atan2(y[hs / 2 + i], y[i]) - kernels::rope_inverse_frequency(i, hs, r)) < 1e-6);
}

BOOST_AUTO_TEST_CASE(swiglu_forward_and_backward) {
  const int N = 7, F = 10;
  auto x = random_vector(N * 2 * F, 77, 2.0f);
  std::vector<float> y(N * F);
  kernels::swiglu_forward(ctx, as_tensor(y, {N, F}), as_tensor(x, {N, 2 * F}));
  std::vector<double> expected(N * F);
  for (int n = 0; n < N; ++n)
    for (int f = 0; f < F; ++f) {
      const double g = x[n * 2 * F + f], u = x[n * 2 * F + F + f];
      expected[n * F + f] = g / (1.0 + std::exp(-g)) * u;
    }
  expect_close(y, expected, 1e-5, 1e-3, "swiglu forward");
  const auto upstream = random_vector(N * F, 78);
  std::vector<float> dx(x.size());
  kernels::swiglu_backward(ctx, as_tensor(dx, {N, 2 * F}), as_tensor(x, {N, 2 * F}), as_tensor(upstream, {N, F}));
  auto loss = [&] {
    std::vector<float> out(N * F);
    kernels::swiglu_forward(ctx, as_tensor(out, {N, F}), as_tensor(x, {N, 2 * F}));
    return weighted_sum(out, upstream);
  };
  check_gradient(x, dx, loss, "swiglu backward", 1e-2f, 2e-2, 1e-3, 140);
}

BOOST_AUTO_TEST_CASE(grouped_query_expansion_and_its_gradient) {
  const int rows = 6, Q = 6, KV = 2, hs = 4, group = Q / KV;
  const int compact = (Q + 2 * KV) * hs, full = 3 * Q * hs;
  auto x = random_vector(rows * compact, 79);
  std::vector<float> y(rows * full);
  kernels::expand_kv(ctx, as_tensor(y, {rows, full}), as_tensor(x, {rows, compact}), Q, KV);
  bool copied = true;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < Q; ++h)
      for (int d = 0; d < hs; ++d) {
        const float* in = x.data() + r * compact;
        const float* out = y.data() + r * full;
        copied = copied && out[h * hs + d] == in[h * hs + d] &&                                  // q
                 out[Q * hs + h * hs + d] == in[Q * hs + (h / group) * hs + d] &&               // k of its group
                 out[2 * Q * hs + h * hs + d] == in[(Q + KV) * hs + (h / group) * hs + d];      // v
      }
  BOOST_TEST(copied);
  const auto upstream = random_vector(rows * full, 80);
  std::vector<float> dx(x.size());
  kernels::reduce_kv(ctx, as_tensor(dx, {rows, compact}), as_tensor(upstream, {rows, full}), Q, KV);
  auto loss = [&] {
    std::vector<float> out(rows * full);
    kernels::expand_kv(ctx, as_tensor(out, {rows, full}), as_tensor(x, {rows, compact}), Q, KV);
    return weighted_sum(out, upstream);
  };
  check_gradient(x, dx, loss, "reduce_kv", 1e-2f, 1e-3, 1e-3, 240);  // linear: exact up to rounding
  // Equal head counts: both are copies.
  std::vector<float> same(rows * 3 * Q * hs), again(same.size());
  const auto mha = random_vector(same.size(), 81);
  kernels::expand_kv(ctx, as_tensor(same, {rows, 3 * Q * hs}), as_tensor(mha, {rows, 3 * Q * hs}), Q, Q);
  kernels::reduce_kv(ctx, as_tensor(again, {rows, 3 * Q * hs}), as_tensor(same, {rows, 3 * Q * hs}), Q, Q);
  BOOST_TEST(same == mha);
  BOOST_TEST(again == mha);
}

BOOST_AUTO_TEST_CASE(llama_kernels_check_their_tensors) {
  std::vector<float> a(24), b(24), r(3);
  std::vector<int32_t> positions(2);
  // rope: an odd head size; positions of the wrong length.
  BOOST_CHECK_THROW(kernels::rope(ctx, as_tensor(a, {1, 2, 12}), as_tensor(positions), 2, 1, kernels::RopeFrequencies{}, false),
                    std::logic_error);  // 12 / 4 heads = 3: odd
  BOOST_CHECK_THROW(kernels::rope(ctx, as_tensor(a, {1, 3, 8}), as_tensor(positions), 1, 1, kernels::RopeFrequencies{}, false),
                    std::logic_error);  // 3 rows, 2 positions
  BOOST_CHECK_THROW(kernels::rmsnorm_forward(ctx, as_tensor(b), as_tensor(r), as_tensor(a, {4, 6}), as_tensor(r), 1e-5f),
                    std::logic_error);  // weight of 3 for 6 columns
  BOOST_CHECK_THROW(kernels::expand_kv(ctx, as_tensor(b), as_tensor(a, {2, 12}), 3, 2), std::logic_error);  // 3 not a multiple of 2
  BOOST_CHECK_THROW(kernels::swiglu_forward(ctx, as_tensor(a, {2, 12}), as_tensor(b, {2, 12})), std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()
