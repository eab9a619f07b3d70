// The tiled attention (kernels/cpu/flash_attention.cpp) against the materialized one
// (kernels/cpu/attention.cpp): the output and every gradient, at sizes that cross the tiles'
// edges (T = 1, one short of a 128-query tile, one past it, several tiles) and heads of 8, 64 and
// 128 channels, and the same bits at any thread count.
#include <boost/test/unit_test.hpp>

#include <omp.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_check.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/kernels.hpp"

using namespace trident;
using namespace trident::testing;

namespace {

struct Shape4 {
  int B, T, C, NH;
};

struct Results {
  std::vector<float> out, dqkv;
};

Results materialized(const Shape4& s, const std::vector<float>& qkv, const std::vector<float>& dout) {
  kernels::Context ctx;
  Results r{std::vector<float>(static_cast<size_t>(s.B) * s.T * s.C), std::vector<float>(qkv.size())};
  std::vector<float> att(static_cast<size_t>(s.B) * s.NH * s.T * s.T), datt(att.size());
  kernels::cpu::attention_forward(ctx, r.out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  kernels::cpu::attention_backward(ctx, r.dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), s.B, s.T,
                                   s.C, s.NH);
  return r;
}

Results tiled(const Shape4& s, const std::vector<float>& qkv, const std::vector<float>& dout) {
  kernels::Context ctx;
  Results r{std::vector<float>(static_cast<size_t>(s.B) * s.T * s.C), std::vector<float>(qkv.size(), -1.0f)};
  std::vector<float> lse(static_cast<size_t>(s.B) * s.NH * s.T);
  kernels::cpu::flash_attention_forward(ctx, r.out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  kernels::cpu::flash_attention_backward(ctx, r.dqkv.data(), dout.data(), qkv.data(), r.out.data(), lse.data(), s.B,
                                         s.T, s.C, s.NH);
  return r;
}

std::vector<double> wide(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

BOOST_AUTO_TEST_SUITE(flash_attention)

BOOST_AUTO_TEST_CASE(equals_the_materialized_attention_across_tile_edges) {
  for (const Shape4 s : {Shape4{2, 1, 16, 2}, Shape4{2, 127, 16, 2}, Shape4{1, 129, 128, 2}, Shape4{2, 300, 64, 8},
                         Shape4{1, 257, 256, 2}}) {
    const std::vector<float> qkv = random_vector(static_cast<size_t>(s.B) * s.T * 3 * s.C, 11, 1.0f);
    const std::vector<float> dout = random_vector(static_cast<size_t>(s.B) * s.T * s.C, 12, 1.0f);
    const Results expected = materialized(s, qkv, dout), actual = tiled(s, qkv, dout);
    const std::string at = "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " hs=" + std::to_string(s.C / s.NH);
    // Values of order 1 that the two sum in different orders: within a few float roundings of
    // each other, relative to the values' scale (atol 1), not to a value that cancels to ~0.
    expect_close(actual.out, wide(expected.out), 1e-5, 1.0, "output, " + at);
    expect_close(actual.dqkv, wide(expected.dqkv), 1e-5, 1.0, "dqkv, " + at);
  }
}

// Each query tile (forward) and each head (backward) on one thread, its GEMMs single-threaded
// inside the parallel loop: the same bits at 1 and at 3 threads.
BOOST_AUTO_TEST_CASE(the_same_bits_at_any_thread_count) {
  for (const Shape4 s : {Shape4{2, 200, 64, 4}, Shape4{1, 150, 64, 2}}) {
    const std::vector<float> qkv = random_vector(static_cast<size_t>(s.B) * s.T * 3 * s.C, 21, 1.0f);
    const std::vector<float> dout = random_vector(static_cast<size_t>(s.B) * s.T * s.C, 22, 1.0f);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Results one = tiled(s, qkv, dout);
    omp_set_num_threads(3);
    const Results three = tiled(s, qkv, dout);
    omp_set_num_threads(threads);
    BOOST_TEST(one.out == three.out);
    BOOST_TEST(one.dqkv == three.dqkv);
  }
}

// Through the operation (kernels/ops.inc): the same results as the kernel, and row statistics
// of the wrong size refused before anything runs.
BOOST_AUTO_TEST_CASE(the_operation_checks_its_tensors) {
  const Shape4 s{1, 70, 32, 2};
  const std::vector<float> qkv = random_vector(static_cast<size_t>(s.T) * 3 * s.C, 31, 1.0f);
  std::vector<float> out(static_cast<size_t>(s.T) * s.C), lse(static_cast<size_t>(s.NH) * s.T);
  kernels::Context ctx;
  const Tensor q = view(qkv.data(), Shape{s.B, s.T, 3 * s.C});
  kernels::flash_attention_forward(ctx, view(out.data(), out.size()), view(lse.data(), lse.size()), q, s.NH);
  const std::vector<float> dout(out.size(), 0.0f);
  BOOST_TEST(out == tiled(s, qkv, dout).out);
  BOOST_CHECK_THROW(kernels::flash_attention_forward(ctx, view(out.data(), out.size()),
                                                     view(lse.data(), lse.size() - 1), q, s.NH),
                    std::logic_error);
}

// Ring attention's blocks (kernels::AttentionBlock) on one rank: a sequence cut into 2 or 3
// chunks, each query chunk folded over the key chunks at and before it (the first block written,
// the rest folded in, the diagonal causal), with kv = the qkv itself (W = 3C), equals the whole
// flash attention — out, lse and every gradient (accumulated into a cleared dqkv) — within fp32
// rounding; the chunks cross the 128-row tiles.
BOOST_AUTO_TEST_CASE(blocks_folded_over_chunks_equal_the_whole_sequence) {
  for (const auto& [B, chunks, rows, C, NH] : std::vector<std::array<int, 5>>{{2, 2, 7, 16, 2}, {1, 3, 130, 64, 4}}) {
    const Shape4 s{B, chunks * rows, C, NH};
    const std::vector<float> qkv = random_vector(static_cast<size_t>(s.B) * s.T * 3 * s.C, 41, 1.0f);
    const std::vector<float> dout = random_vector(static_cast<size_t>(s.B) * s.T * s.C, 42, 1.0f);
    const Results whole = tiled(s, qkv, dout);
    std::vector<float> whole_lse(static_cast<size_t>(s.B) * s.NH * s.T), scratch(whole.out.size());
    kernels::Context ctx;
    kernels::cpu::flash_attention_forward(ctx, scratch.data(), whole_lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    std::vector<float> out(whole.out.size()), lse(whole_lse.size()), dqkv(qkv.size(), 0.0f);
    const Tensor q = view(qkv.data(), Shape{s.B, s.T, 3 * s.C});
    const Tensor o = view(out.data(), Shape{s.B, s.T, s.C}), l = view(lse.data(), lse.size());
    for (int i = 0; i < chunks; ++i)
      for (int j = 0; j <= i; ++j)  // the diagonal last: the folding starts from a whole block
        kernels::flash_attention_block_forward(ctx, o, l, q, q, s.NH, kernels::AttentionBlock{i, j, rows, i == j, j == 0});
    const std::string at = "B=" + std::to_string(B) + ", " + std::to_string(chunks) + " chunks of " + std::to_string(rows);
    expect_close(out, wide(whole.out), 1e-5, 1.0, "output, " + at);
    expect_close(lse, wide(whole_lse), 1e-5, 1.0, "lse, " + at);
    const Tensor dq = view(dqkv.data(), Shape{s.B, s.T, 3 * s.C});
    for (int i = 0; i < chunks; ++i)
      for (int j = 0; j <= i; ++j)
        kernels::flash_attention_block_backward(ctx, dq, dq, view(dout.data(), Shape{s.B, s.T, s.C}), q, q, o, l, s.NH,
                                                kernels::AttentionBlock{i, j, rows, i == j});
    expect_close(dqkv, wide(whole.dqkv), 1e-5, 1.0, "dqkv, " + at);
  }
}

// A block off the diagonal cannot be causal, and chunks must lie inside the T rows.
BOOST_AUTO_TEST_CASE(a_block_outside_the_sequence_is_refused) {
  std::vector<float> qkv(2 * 8 * 3 * 16), out(2 * 8 * 16), lse(2 * 2 * 8);
  kernels::Context ctx;
  const Tensor q = view(qkv.data(), Shape{2, 8, 48}), o = view(out.data(), Shape{2, 8, 16});
  const Tensor l = view(lse.data(), lse.size());
  BOOST_CHECK_THROW(kernels::flash_attention_block_forward(ctx, o, l, q, q, 2, kernels::AttentionBlock{1, 0, 4, true}),
                    std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_block_forward(ctx, o, l, q, q, 2, kernels::AttentionBlock{2, 0, 4, false}),
                    std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()
