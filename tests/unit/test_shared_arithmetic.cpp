// The arithmetic that the CUDA kernels share with the CPU (kernels/common/*.hpp: __host__
// __device__ functions, plain inline C++ here) against the CPU backend's kernels on random
// inputs: the 16-bit roundings bit for bit (every fp16 and bf16 value widened, random and
// edge-case floats rounded), the element-wise pieces bit for bit where the CPU runs the same
// operations (GELU backward, the cross-entropy pieces, the sum of squares) and within f32
// rounding where it does not (oneDNN's GELU forward and LayerNorm, the attention softmax).
// That is what a CUDA kernel computes per element; tests/gpu/ checks the kernels themselves.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_check.hpp"
#include "kernels/common/elementwise.hpp"
#include "kernels/common/low16.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/cpu/cpu.hpp"

using namespace trident;
using namespace trident::testing;
using kernels::Context;
using kernels::low16;

namespace {

Context ctx;

std::vector<uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// Floats of every magnitude the 16-bit types meet: random ones over 2^-30 .. 2^20 (fp16's
// subnormals, normals and overflow, bf16 everywhere), the halfway ties of fp16 around 1, 2^-24
// and 65504, zeros, infinities and NaNs with payloads.
std::vector<float> rounding_inputs() {
  std::vector<float> values = random_vector(20000, 7);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::ldexp(values[i], static_cast<int>(i % 51) - 30);
  for (int k = 0; k < 64; ++k) {
    values.push_back(1.0f + (k + 0.5f) / 1024.0f);                           // fp16 ties at 1
    values.push_back(std::ldexp(1.0f + (k + 0.5f) / 1024.0f, -15));          // ties near subnormals
    values.push_back(std::ldexp(static_cast<float>(k) + 0.5f, -24));        // subnormal ties
    values.push_back(65504.0f + static_cast<float>(k));                      // to the fp16 overflow
    values.push_back(std::nextafter(std::ldexp(1.0f + k / 128.0f, 3), 0.0f));  // below bf16 ties
  }
  for (uint32_t payload : {0x7f800001u, 0x7fc00000u, 0xffc12345u, 0x7fbfffffu, 0x7f802000u}) {
    float nan;
    std::memcpy(&nan, &payload, sizeof nan);
    values.push_back(nan);
  }
  for (float special : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()})
    values.push_back(special);
  return values;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shared_arithmetic)

BOOST_AUTO_TEST_CASE(low16_rounding_equals_the_cpu_bit_for_bit) {
  const std::vector<float> values = rounding_inputs();
  const size_t n = values.size();
  std::vector<low16> bf16(n), fp16(n);
  kernels::cpu::to_bf16(ctx, bf16.data(), values.data(), n);
  kernels::cpu::to_fp16(ctx, fp16.data(), values.data(), n);
  size_t bf16_wrong = 0, fp16_wrong = 0, first_fp16_wrong = n;
  for (size_t i = 0; i < n; ++i) {
    bf16_wrong += kernels::bf16_round(values[i]) != bf16[i];
    if (kernels::fp16_round(values[i]) != fp16[i]) {
      if (fp16_wrong++ == 0) first_fp16_wrong = i;
    }
  }
  BOOST_TEST(bf16_wrong == 0u);
  BOOST_TEST(fp16_wrong == 0u, "first at " << first_fp16_wrong << ": "
                                           << (first_fp16_wrong < n ? values[first_fp16_wrong] : 0.0f));
}

BOOST_AUTO_TEST_CASE(low16_widening_equals_the_cpu_for_every_value) {
  std::vector<low16> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<low16>(i);
  std::vector<float> bf16(65536), fp16(65536), shared_bf16(65536), shared_fp16(65536);
  kernels::cpu::from_bf16(ctx, bf16.data(), all.data(), all.size());
  kernels::cpu::from_fp16(ctx, fp16.data(), all.data(), all.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    shared_bf16[i] = kernels::bf16_widen(all[i]);
    shared_fp16[i] = kernels::fp16_widen(all[i]);
  }
  BOOST_TEST(bits_of(shared_bf16) == bits_of(bf16));
  BOOST_TEST(bits_of(shared_fp16) == bits_of(fp16));
}

BOOST_AUTO_TEST_CASE(gelu_matches_the_cpu) {
  const auto x = random_vector(5000, 11, 3.0f), dout = random_vector(5000, 12);
  std::vector<float> y(x.size()), dx(x.size());
  kernels::cpu::gelu_forward(ctx, y.data(), x.data(), x.size());  // oneDNN's
  kernels::cpu::gelu_backward(ctx, dx.data(), x.data(), dout.data(), x.size());
  std::vector<double> shared_y(x.size());
  std::vector<float> shared_dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    shared_y[i] = kernels::gelu_value(x[i]);
    shared_dx[i] = kernels::gelu_gradient(x[i], dout[i]);
  }
  // Within 1e-5 relative, or 5e-7 absolute: oneDNN's 0.5 x (1 + tanh u) loses the negative tail
  // to cancellation (values below ~1e-7 come out 0), which x σ(2u) keeps: the shared function
  // is within 1e-5 relative of the exact value everywhere (u rounded to f32, times 2u in e^-2u).
  expect_close(y, shared_y, 1e-5, 5e-2, "GELU forward: oneDNN against the shared formula");
  std::vector<float> shared_y_f(shared_y.begin(), shared_y.end());
  std::vector<double> exact(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    exact[i] = v / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  expect_close(shared_y_f, exact, 1e-5, 1e-30, "GELU forward: the shared formula against double");
  std::vector<double> shared_dx_d(shared_dx.begin(), shared_dx.end());
  expect_close(dx, shared_dx_d, 1e-6, 1e-6, "GELU backward: the same operations");
}

BOOST_AUTO_TEST_CASE(adamw_matches_the_cpu) {
  const size_t n = 3000;
  auto [params, grads, m, v] = random_adamw_state(n, 20);
  auto p2 = params, m2 = m, v2 = v;
  const kernels::AdamWSegment all{0, int64_t(n), true};
  kernels::cpu::adamw_update(ctx, params.data(), nullptr, DType::bf16, grads.data(), m.data(), v.data(), &all, 1, 3e-4f,
                             0.9f, 0.95f, 1e-8f, 0.1f, 7, 0.5f, nullptr);
  const kernels::AdamWStep step = kernels::adamw_step(3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 7, 0.5f);
  for (size_t i = 0; i < n; ++i) kernels::adamw_element(step, p2[i], grads[i], m2[i], v2[i]);
  expect_close(p2, std::vector<double>(params.begin(), params.end()), 1e-6, 1e-6, "AdamW parameters");
  expect_close(m2, std::vector<double>(m.begin(), m.end()), 1e-6, 1e-6, "AdamW first moment");
  expect_close(v2, std::vector<double>(v.begin(), v.end()), 1e-6, 1e-9, "AdamW second moment");
}

BOOST_AUTO_TEST_CASE(sum_of_squares_chunks_give_the_cpu_sum) {
  const auto x = random_vector(3 * kernels::kSumOfSquaresChunk + 1234, 30);
  double shared = 0.0;
  for (size_t begin = 0; begin < x.size(); begin += kernels::kSumOfSquaresChunk)
    shared += kernels::sum_of_squares_chunk(x.data(), begin, std::min(x.size(), begin + kernels::kSumOfSquaresChunk));
  const float* part = x.data();
  const size_t count = x.size();
  double cpu = 0.0;
  kernels::cpu::sums_of_squares(ctx, &cpu, &part, &count, 1);
  BOOST_TEST(std::fabs(shared - cpu) <= 1e-14 * cpu, shared << " vs " << cpu);
}

// The chunk's sum split over its lanes as the CUDA kernel's threads run it: the tail, then each
// lane's sum in lane order — the same additions as sum_of_squares_chunk, so the same bits, for
// chunks with and without a tail, shorter than one group, and empty.
BOOST_AUTO_TEST_CASE(a_chunk_summed_by_lanes_is_the_chunk_sum) {
  const auto x = random_vector(kernels::kSumOfSquaresChunk, 31, 3.0f);
  for (size_t n : {kernels::kSumOfSquaresChunk, size_t(777), size_t(16), size_t(9), size_t(1), size_t(0)}) {
    const size_t begin = 0, end = n, tail = kernels::sum_of_squares_tail(begin, end);
    BOOST_TEST(tail == end - n % kernels::kSumOfSquaresLanes);
    double by_lanes = kernels::sum_of_squares_tail_sum(x.data(), tail, end);
    for (int l = 0; l < kernels::kSumOfSquaresLanes; ++l)
      by_lanes += kernels::sum_of_squares_lane(x.data(), begin, tail, l);
    const double chunk = kernels::sum_of_squares_chunk(x.data(), begin, end);
    BOOST_TEST(std::memcmp(&by_lanes, &chunk, sizeof chunk) == 0, n << " values: " << by_lanes << " vs " << chunk);
  }
}

// The row statistics in f32 as a block reduction would sum them (here in index order), then
// the shared per-element functions, against oneDNN's LayerNorm.
BOOST_AUTO_TEST_CASE(layernorm_elements_match_the_cpu) {
  const int N = 7, C = 96;
  const auto x = random_vector(N * C, 40, 2.0f), w = random_vector(C, 41), b = random_vector(C, 42);
  const auto dout = random_vector(N * C, 43);
  std::vector<float> y(N * C), mean(N), variance(N), dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  kernels::cpu::layernorm_forward(ctx, y.data(), mean.data(), variance.data(), x.data(), w.data(), b.data(), N, C);
  kernels::cpu::layernorm_backward(ctx, dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), b.data(),
                                   mean.data(), variance.data(), N, C, kernels::Precision::fp32, nullptr);
  std::vector<double> shared_y(N * C), shared_dx(N * C);
  for (int n = 0; n < N; ++n) {
    const float* row = x.data() + n * C;
    float m = 0.0f, var = 0.0f;
    for (int c = 0; c < C; ++c) m += row[c];
    m /= C;
    for (int c = 0; c < C; ++c) var += (row[c] - m) * (row[c] - m);
    var /= C;
    BOOST_TEST(std::fabs(m - mean[n]) <= 1e-5f);
    BOOST_TEST(std::fabs(var - variance[n]) <= 1e-5f * variance[n]);
    const float rstd = kernels::layernorm_rstd(var);
    float dxhat_sum = 0.0f, dxhat_xhat_sum = 0.0f;
    for (int c = 0; c < C; ++c) {
      shared_y[n * C + c] = kernels::layernorm_value(row[c], m, rstd, w[c], b[c]);
      dxhat_sum += dout[n * C + c] * w[c];
      dxhat_xhat_sum += dout[n * C + c] * w[c] * (row[c] - m) * rstd;
    }
    for (int c = 0; c < C; ++c)
      shared_dx[n * C + c] = kernels::layernorm_input_gradient(dout[n * C + c], w[c], (row[c] - m) * rstd, rstd,
                                                               dxhat_sum / C, dxhat_xhat_sum / C);
  }
  // Outputs are O(1): an output near zero is judged on the row's scale (atol 1e-2), not on its
  // own (the -O1 sanitizer build rounds the mean and variance sums in another order: 3e-8 apart
  // at -0.0012 was 2e-5 "relative").
  expect_close(y, shared_y, 1e-5, 1e-2, "LayerNorm forward");
  expect_close(dx, shared_dx, 1e-4, 1e-3, "LayerNorm input gradient");
}

// The causal softmax of attention and its backward, per element, against the CPU's
// attention_forward (att) and attention_backward (datt holds dS) on a small problem.
BOOST_AUTO_TEST_CASE(softmax_elements_match_the_cpu_attention) {
  const int B = 2, T = 9, C = 16, NH = 2, hs = C / NH;
  const auto qkv = random_vector(B * T * 3 * C, 50), dout = random_vector(B * T * C, 51);
  std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(qkv.size()), datt(att.size());
  kernels::cpu::attention_forward(ctx, out.data(), att.data(), qkv.data(), B, T, C, NH);
  kernels::cpu::attention_backward(ctx, dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<double> shared_att(att.size()), shared_datt(att.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const size_t row = ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        auto q = [&](int pos, int part, int d) { return qkv[(b * T + pos) * 3 * C + part * C + h * hs + d]; };
        std::vector<float> scores(T), p(T), dp(T);
        float max = -INFINITY, sum = 0.0f, dot = 0.0f;
        for (int s = 0; s <= t; ++s) {
          float score = 0.0f;
          for (int d = 0; d < hs; ++d) score += q(t, 0, d) * q(s, 1, d);
          scores[s] = score;
          max = std::max(max, score * scale);
        }
        for (int s = 0; s <= t; ++s) sum += (p[s] = kernels::softmax_numerator(scores[s], scale, max));
        for (int s = 0; s <= t; ++s) {
          p[s] /= sum;
          for (int d = 0; d < hs; ++d) dp[s] += dout[(b * T + t) * C + h * hs + d] * q(s, 2, d);
          dot += dp[s] * p[s];
        }
        for (int s = 0; s <= t; ++s) {
          shared_att[row + s] = p[s];
          shared_datt[row + s] = kernels::softmax_gradient(p[s], dp[s], dot, scale);
        }
      }
  expect_close(att, shared_att, 1e-5, 1e-5, "causal softmax");
  expect_close(datt, shared_datt, 1e-4, 1e-4, "softmax backward (dS)");
}

BOOST_AUTO_TEST_CASE(crossentropy_pieces_equal_the_cpu_bit_for_bit) {
  const int N = 6, valid = 37, ld = 40, vocab_begin = 100;
  const auto logits = random_vector(N * ld, 60, 3.0f);
  const std::vector<int32_t> targets = {100, 136, 99, 137, 120, 100};  // in the slice, and not
  std::vector<float> maxes(N), sums(N), target_logits(N), losses(N), normalizers(N), dlogits(N * ld);
  kernels::cpu::crossentropy_row_max(ctx, maxes.data(), logits.data(), N, valid, ld);
  kernels::cpu::crossentropy_row_sums(ctx, sums.data(), target_logits.data(), logits.data(), maxes.data(),
                                      targets.data(), vocab_begin, N, valid, ld);
  kernels::cpu::crossentropy_losses(ctx, losses.data(), normalizers.data(), maxes.data(), sums.data(),
                                    target_logits.data(), N);
  kernels::cpu::crossentropy_backward(ctx, dlogits.data(), logits.data(), normalizers.data(), targets.data(),
                                      vocab_begin, 0.25f, N, valid, ld);
  for (int n = 0; n < N; ++n) {
    const int column = kernels::slice_column(targets[n], vocab_begin, valid);
    BOOST_TEST(target_logits[n] == (column >= 0 ? logits[n * ld + column] : 0.0f));
    float loss, normalizer;
    kernels::crossentropy_row(maxes[n], sums[n], target_logits[n], loss, normalizer);
    BOOST_TEST(loss == losses[n]);
    BOOST_TEST(normalizer == normalizers[n]);
    for (int i = 0; i < ld; ++i) {
      float d = i < valid ? kernels::crossentropy_gradient(logits[n * ld + i], normalizer, 0.25f) : 0.0f;
      if (i == column) d -= 0.25f;
      BOOST_TEST(d == dlogits[n * ld + i], "row " << n << " column " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(slice_column_is_the_embedding_row) {
  const int B = 1, T = 5, C = 3, rows = 4, vocab_begin = 2;
  const auto wte = random_vector(rows * C, 70);
  const std::vector<int32_t> tokens = {1, 2, 5, 6, 3};
  std::vector<float> out(B * T * C);
  kernels::cpu::embedding_forward(ctx, out.data(), tokens.data(), wte.data(), vocab_begin, rows, B, T, C);
  for (int t = 0; t < T; ++t) {
    const int row = kernels::slice_column(tokens[t], vocab_begin, rows);
    for (int c = 0; c < C; ++c) BOOST_TEST(out[t * C + c] == (row < 0 ? 0.0f : wte[row * C + c]));
  }
}

BOOST_AUTO_TEST_SUITE_END()
