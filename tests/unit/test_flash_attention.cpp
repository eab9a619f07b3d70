// The tiled attention (kernels/cpu/flash_attention.cpp) against the materialized one
// (kernels/cpu/attention.cpp): the output and every gradient, at sizes that cross the tiles'
// edges (T = 1, one short of a 128-query tile, one past it, several tiles) and heads of 8, 64 and
// 128 channels, the same bits at any thread count, and 16-bit q, k, v and y read and written as
// the model keeps them; grouped-query attention's heads read as they are against the multi-head
// attention of the same heads expanded (kernels::expand_kv).
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

// KV key/value heads (0: NH, multi-head attention).
struct Shape4 {
  int B, T, C, NH, KV = 0;
  int kv() const { return KV ? KV : NH; }
  int64_t width() const { return C + 2 * int64_t(kv()) * (C / NH); }  // of qkv: (NH + 2·KV)·hs
  size_t qkv_size() const { return size_t(B) * T * width(); }
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

Tensor qkv_view(const Shape4& s, const float* qkv) { return view(qkv, Shape{s.B, s.T, s.width()}); }
Tensor y_view(const Shape4& s, const float* y) { return view(y, Shape{s.B, s.T, s.C}); }

Results tiled(const Shape4& s, const std::vector<float>& qkv, const std::vector<float>& dout,
              std::vector<float>* lse_out = nullptr) {
  kernels::Context ctx;
  Results r{std::vector<float>(static_cast<size_t>(s.B) * s.T * s.C), std::vector<float>(qkv.size(), -1.0f)};
  std::vector<float> lse(static_cast<size_t>(s.B) * s.NH * s.T);
  const Tensor l = view(lse.data(), lse.size());
  kernels::flash_attention_forward(ctx, y_view(s, r.out.data()), l, qkv_view(s, qkv.data()), s.NH, s.kv());
  kernels::flash_attention_backward(ctx, qkv_view(s, r.dqkv.data()), y_view(s, dout.data()), qkv_view(s, qkv.data()),
                                    y_view(s, r.out.data()), l, s.NH, s.kv());
  if (lse_out != nullptr) *lse_out = lse;
  return r;
}

// values rounded to `type` (as 16-bit bits), and those bits widened back.
std::vector<uint16_t> rounded(const std::vector<float>& values, DType type) {
  kernels::Context ctx;
  std::vector<uint16_t> bits(values.size());
  kernels::convert(ctx, Tensor{bits.data(), type, Shape{int64_t(bits.size())}, Device{}}, view(values.data(), values.size()));
  return bits;
}
std::vector<float> widened(const std::vector<uint16_t>& bits, DType type) {
  kernels::Context ctx;
  std::vector<float> values(bits.size());
  kernels::convert(ctx, view(values.data(), values.size()), Tensor{const_cast<uint16_t*>(bits.data()), type,
                                                                    Shape{int64_t(bits.size())}, Device{}});
  return values;
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

// Each query tile (forward) and each key/value head (backward) on one thread, its GEMMs single-threaded
// inside the parallel loop: the same bits at 1 and at 3 threads — also where the 3 threads
// outnumber the B·KV key/value heads and backward runs in two passes over tiles.
BOOST_AUTO_TEST_CASE(the_same_bits_at_any_thread_count) {
  for (const Shape4 s : {Shape4{2, 200, 64, 4}, Shape4{1, 150, 64, 2}, Shape4{2, 150, 64, 4, 2}, Shape4{1, 300, 64, 4, 1},
                         Shape4{1, 1, 64, 4, 2}}) {
    const std::vector<float> qkv = random_vector(s.qkv_size(), 21, 1.0f);
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
  const Tensor o = y_view(s, out.data());
  kernels::flash_attention_forward(ctx, o, view(lse.data(), lse.size()), q, s.NH, s.NH);
  const std::vector<float> dout(out.size(), 0.0f);
  BOOST_TEST(out == tiled(s, qkv, dout).out);
  BOOST_CHECK_THROW(kernels::flash_attention_forward(ctx, o, view(lse.data(), lse.size() - 1), q, s.NH, s.NH),
                    std::logic_error);
  // Head counts that do not divide (3 query heads of 32 channels; 2 over 4 key/value heads), and
  // a qkv (B, T, 3C) read as grouped (1 key/value head: (B, T, 2C) wanted).
  BOOST_CHECK_THROW(kernels::flash_attention_forward(ctx, o, view(lse.data(), lse.size()), q, 3, 1), std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_forward(ctx, o, view(lse.data(), lse.size()), q, s.NH, 2 * s.NH),
                    std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_forward(ctx, o, view(lse.data(), lse.size()), q, s.NH, 1),
                    std::logic_error);
}

// Ring attention's blocks (kernels::AttentionBlock) on one rank: a sequence cut into 2 or 3
// chunks, each query chunk folded over the key chunks at and before it (the first block written,
// the rest folded in, the diagonal causal), equals the whole flash attention — out, lse and every
// gradient (accumulated into a cleared dqkv) — within fp32 rounding; the chunks cross the 128-row
// tiles. The (k, v) are the qkv itself (W = its width), or packed into a (B, T, 2·KV·hs) buffer as
// the ring sends them, with their gradients in one of that layout (added back to dqkv's k and v
// columns after); grouped heads too.
BOOST_AUTO_TEST_CASE(blocks_folded_over_chunks_equal_the_whole_sequence) {
  for (const auto& [B, chunks, rows, C, NH, KV] :
       std::vector<std::array<int, 6>>{{2, 2, 7, 16, 2, 2}, {1, 3, 130, 64, 4, 4}, {2, 2, 70, 64, 4, 1}, {1, 3, 50, 64, 4, 2},
                                       {1, 2, 140, 64, 4, 1}}) {
    const Shape4 s{B, chunks * rows, C, NH, KV};
    const std::vector<float> qkv = random_vector(s.qkv_size(), 41, 1.0f);
    const std::vector<float> dout = random_vector(static_cast<size_t>(s.B) * s.T * s.C, 42, 1.0f);
    std::vector<float> whole_lse;
    const Results whole = tiled(s, qkv, dout, &whole_lse);
    const int64_t W = s.width(), kv_width = W - C;
    std::vector<float> packed(size_t(B) * s.T * kv_width);
    for (size_t row = 0; row < size_t(B) * s.T; ++row)
      std::copy_n(qkv.begin() + row * W + C, kv_width, packed.begin() + row * kv_width);
    for (const bool pack : {false, true}) {
      kernels::Context ctx;
      std::vector<float> out(whole.out.size()), lse(whole_lse.size()), dqkv(qkv.size(), 0.0f), dkv(packed.size(), 0.0f);
      const Tensor q = qkv_view(s, qkv.data());
      const Tensor kv = pack ? view(packed.data(), Shape{B, s.T, kv_width}) : q;
      const Tensor o = y_view(s, out.data()), l = view(lse.data(), lse.size());
      for (int i = 0; i < chunks; ++i)
        for (int j = 0; j <= i; ++j)  // the diagonal last: the folding starts from a whole block
          kernels::flash_attention_block_forward(ctx, o, l, q, kv, NH, KV, kernels::AttentionBlock{i, j, rows, i == j, j == 0});
      const std::string at = "B=" + std::to_string(B) + ", " + std::to_string(chunks) + " chunks of " +
                             std::to_string(rows) + ", " + std::to_string(NH) + " heads over " + std::to_string(KV) +
                             (pack ? ", packed (k, v)" : "");
      expect_close(out, wide(whole.out), 1e-5, 1.0, "output, " + at);
      expect_close(lse, wide(whole_lse), 1e-5, 1.0, "lse, " + at);
      const Tensor dq = qkv_view(s, dqkv.data());
      const Tensor dk = pack ? view(dkv.data(), Shape{B, s.T, kv_width}) : dq;
      for (int i = 0; i < chunks; ++i)
        for (int j = 0; j <= i; ++j)
          kernels::flash_attention_block_backward(ctx, dq, dk, y_view(s, dout.data()), q, kv, o, l, NH, KV,
                                                  kernels::AttentionBlock{i, j, rows, i == j});
      if (pack)
        for (size_t row = 0; row < size_t(B) * s.T; ++row)
          std::copy_n(dkv.begin() + row * kv_width, kv_width, dqkv.begin() + row * W + C);
      expect_close(dqkv, wide(whole.dqkv), 1e-5, 1.0, "dqkv, " + at);
    }
  }
}

// Grouped-query attention (query head h against key/value head h / (NH / KV)) read as it is
// equals the multi-head attention of its key and value heads expanded to every query head
// (kernels::expand_kv), its gradient summed back (kernels::reduce_kv): the output, lse and dq to
// the bit (the same products on the same values), dk and dv within fp32 rounding (each group's
// heads added in another order) — across tile edges, heads of 64 and 128 channels, one key/value
// head or two, f32 and 16-bit values (y and dqkv's 16-bit copy written in their type).
BOOST_AUTO_TEST_CASE(grouped_heads_equal_their_expanded_multi_head_attention) {
  for (const Shape4 g : {Shape4{2, 1, 64, 4, 2}, Shape4{2, 130, 64, 4, 2}, Shape4{1, 129, 256, 2, 1},
                         Shape4{1, 200, 512, 8, 2}, Shape4{2, 127, 128, 4, 1}}) {
    for (const DType type : {DType::f32, DType::bf16, DType::fp16}) {
      const Shape4 full{g.B, g.T, g.C, g.NH};
      const int64_t rows = int64_t(g.B) * g.T;
      const bool low = type != DType::f32;
      std::vector<float> qkv = random_vector(g.qkv_size(), 61, 1.0f);
      if (low) qkv = widened(rounded(qkv, type), type);  // values a 16-bit model can hold
      const std::vector<float> dout = random_vector(static_cast<size_t>(rows) * g.C, 62, 1.0f);
      kernels::Context ctx;
      std::vector<float> expanded(full.qkv_size());
      kernels::expand_kv(ctx, view(expanded.data(), Shape{rows, full.width()}), view(qkv.data(), Shape{rows, g.width()}),
                         g.NH, g.kv());
      // The multi-head run on the expanded f32 values (16-bit values widened exactly: the same arithmetic).
      std::vector<float> lse_full;
      const Results mha = tiled(full, expanded, dout, &lse_full);
      std::vector<float> expected_dqkv(qkv.size());
      kernels::reduce_kv(ctx, view(expected_dqkv.data(), Shape{rows, g.width()}),
                         view(mha.dqkv.data(), Shape{rows, full.width()}), g.NH, g.kv());
      // The grouped run, in the values' own type.
      std::vector<uint16_t> qkv_bits = low ? rounded(qkv, type) : std::vector<uint16_t>{};
      std::vector<uint16_t> y_bits(low ? dout.size() : 0), dqkv_bits(low ? qkv.size() : 0);
      std::vector<float> y(dout.size()), lse(lse_full.size()), dqkv(qkv.size(), -1.0f);
      const Tensor q = low ? Tensor{qkv_bits.data(), type, Shape{g.B, g.T, g.width()}, Device{}} : qkv_view(g, qkv.data());
      const Tensor o = low ? Tensor{y_bits.data(), type, Shape{g.B, g.T, g.C}, Device{}} : y_view(g, y.data());
      const Tensor copy = low ? Tensor{dqkv_bits.data(), type, Shape{g.B, g.T, g.width()}, Device{}} : Tensor{};
      const Tensor l = view(lse.data(), lse.size());
      kernels::flash_attention_forward(ctx, o, l, q, g.NH, g.kv());
      const std::string at = "B=" + std::to_string(g.B) + " T=" + std::to_string(g.T) + " hs=" +
                             std::to_string(g.C / g.NH) + ", " + std::to_string(g.NH) + " heads over " +
                             std::to_string(g.kv()) + ", " + dtype_name(type);
      if (low) {
        BOOST_TEST(y_bits == rounded(mha.out, type), at << ": y");
      } else {
        BOOST_TEST(y == mha.out, at << ": y");
      }
      BOOST_TEST(lse == lse_full, at << ": lse");
      if (low) {  // the multi-head backward again, from the rounded y the grouped one reads
        const std::vector<float> y_rounded = widened(y_bits, type);
        std::vector<float> d_full(full.qkv_size());
        kernels::flash_attention_backward(ctx, qkv_view(full, d_full.data()), y_view(g, dout.data()),
                                          qkv_view(full, expanded.data()), y_view(g, y_rounded.data()),
                                          view(lse_full.data(), lse_full.size()), g.NH, g.NH);
        kernels::reduce_kv(ctx, view(expected_dqkv.data(), Shape{rows, g.width()}),
                           view(d_full.data(), Shape{rows, full.width()}), g.NH, g.kv());
      }
      kernels::flash_attention_backward(ctx, qkv_view(g, dqkv.data()), y_view(g, dout.data()), q, o, l, g.NH, g.kv(),
                                        copy);
      expect_close(dqkv, wide(expected_dqkv), 1e-5, 1.0, "dqkv, " + at);
      for (int64_t r = 0; r < rows; ++r)  // dq: each query head's own sums
        for (int c = 0; c < g.C; ++c)
          if (dqkv[r * g.width() + c] != expected_dqkv[r * g.width() + c]) {
            BOOST_ERROR(at << ": dq differs at row " << r << ", column " << c);
            r = rows;
            break;
          }
      if (low) BOOST_TEST(dqkv_bits == rounded(dqkv, type), at << ": dqkv's 16-bit copy");
    }
  }
}

// A 16-bit model's kept q, k, v read as they are, and y written in their type: the same bits as
// the f32 run on the widened values with y rounded (forward), and — backward reading that 16-bit
// y — the same gradients as the f32 run given the widened y; ring blocks on 16-bit (k, v) alike.
BOOST_AUTO_TEST_CASE(reads_and_writes_16_bit_values_as_the_f32_run_on_them) {
  for (const DType type : {DType::bf16, DType::fp16}) {
    const Shape4 s{2, 130, 64, 2};
    const std::string name = dtype_name(type);
    const std::vector<uint16_t> qkv_bits =
        rounded(random_vector(static_cast<size_t>(s.B) * s.T * 3 * s.C, 51, 1.0f), type);
    const std::vector<float> qkv = widened(qkv_bits, type);
    const std::vector<float> dout = random_vector(static_cast<size_t>(s.B) * s.T * s.C, 52, 1.0f);
    kernels::Context ctx;
    // f32: forward, then backward from the rounded y.
    std::vector<float> y(dout.size()), lse(static_cast<size_t>(s.B) * s.NH * s.T), dqkv(qkv.size());
    kernels::flash_attention_forward(ctx, y_view(s, y.data()), view(lse.data(), lse.size()), qkv_view(s, qkv.data()),
                                     s.NH, s.NH);
    const std::vector<uint16_t> y_bits = rounded(y, type);
    const std::vector<float> y_rounded = widened(y_bits, type);
    kernels::flash_attention_backward(ctx, qkv_view(s, dqkv.data()), y_view(s, dout.data()), qkv_view(s, qkv.data()),
                                      y_view(s, y_rounded.data()), view(lse.data(), lse.size()), s.NH, s.NH);
    // 16-bit.
    std::vector<uint16_t> y_low(dout.size());
    std::vector<float> lse_low(lse.size()), dqkv_low(qkv.size());
    const Tensor q_low{const_cast<uint16_t*>(qkv_bits.data()), type, Shape{s.B, s.T, 3 * s.C}, Device{}};
    const Tensor o_low{y_low.data(), type, Shape{s.B, s.T, s.C}, Device{}};
    kernels::flash_attention_forward(ctx, o_low, view(lse_low.data(), lse_low.size()), q_low, s.NH, s.NH);
    BOOST_TEST(y_low == y_bits, name << ": y");
    BOOST_TEST(lse_low == lse, name << ": lse");
    kernels::flash_attention_backward(ctx, qkv_view(s, dqkv_low.data()), y_view(s, dout.data()), q_low, o_low,
                                      view(lse_low.data(), lse_low.size()), s.NH, s.NH);
    BOOST_TEST(dqkv_low == dqkv, name << ": dqkv");
    // With dqkv's 16-bit copy (what the qkv GEMM's backward reads): the same dqkv, and the copy
    // is it rounded — every element, q's, k's and v's columns alike.
    std::vector<float> dqkv_again(qkv.size(), 7.0f);
    std::vector<uint16_t> dqkv_bits(qkv.size(), 0xFFFF);
    const Tensor copy{dqkv_bits.data(), type, Shape{s.B, s.T, 3 * s.C}, Device{}};
    kernels::flash_attention_backward(ctx, qkv_view(s, dqkv_again.data()), y_view(s, dout.data()), q_low, o_low,
                                      view(lse_low.data(), lse_low.size()), s.NH, s.NH, copy);
    BOOST_TEST(dqkv_again == dqkv, name << ": dqkv beside its copy");
    BOOST_TEST(dqkv_bits == rounded(dqkv, type), name << ": dqkv's 16-bit copy");
    // Ring blocks: two chunks, (k, v) = the qkv itself in 16 bits, out f32.
    const int rows = s.T / 2;
    std::vector<float> out32(y.size()), out16(y.size()), lse32(lse.size()), lse16(lse.size());
    std::vector<float> d32(qkv.size(), 0.0f), d16(qkv.size(), 0.0f);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j <= i; ++j) {
        const kernels::AttentionBlock block{i, j, rows, i == j, j == 0};
        kernels::flash_attention_block_forward(ctx, y_view(s, out32.data()), view(lse32.data(), lse32.size()),
                                               qkv_view(s, qkv.data()), qkv_view(s, qkv.data()), s.NH, s.NH, block);
        kernels::flash_attention_block_forward(ctx, y_view(s, out16.data()), view(lse16.data(), lse16.size()), q_low,
                                               q_low, s.NH, s.NH, block);
      }
    BOOST_TEST(out16 == out32, name << ": ring blocks' y");
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j <= i; ++j) {
        const kernels::AttentionBlock block{i, j, rows, i == j};
        kernels::flash_attention_block_backward(ctx, qkv_view(s, d32.data()), qkv_view(s, d32.data()),
                                                y_view(s, dout.data()), qkv_view(s, qkv.data()),
                                                qkv_view(s, qkv.data()), y_view(s, y_rounded.data()),
                                                view(lse32.data(), lse32.size()), s.NH, s.NH, block);
        kernels::flash_attention_block_backward(ctx, qkv_view(s, d16.data()), qkv_view(s, d16.data()),
                                                y_view(s, dout.data()), q_low, q_low, o_low,
                                                view(lse16.data(), lse16.size()), s.NH, s.NH, block);
      }
    BOOST_TEST(d16 == d32, name << ": ring blocks' dqkv");
  }
}

// 16-bit values with an f32 y of another type, a ring block writing a 16-bit y (the blocks fold
// into f32 running sums), and 16-bit (k, v) under f32 queries are refused.
BOOST_AUTO_TEST_CASE(mixed_types_are_refused) {
  const Shape4 s{1, 8, 16, 2};
  std::vector<uint16_t> qkv_bits(8 * 48), y_bits(8 * 16);
  std::vector<float> qkv(8 * 48), y(8 * 16), lse(2 * 8);
  kernels::Context ctx;
  const Tensor q_bf16{qkv_bits.data(), DType::bf16, Shape{1, 8, 48}, Device{}};
  const Tensor y_fp16{y_bits.data(), DType::fp16, Shape{1, 8, 16}, Device{}};
  const Tensor y_bf16{y_bits.data(), DType::bf16, Shape{1, 8, 16}, Device{}};
  const Tensor l = view(lse.data(), lse.size());
  BOOST_CHECK_THROW(kernels::flash_attention_forward(ctx, y_fp16, l, q_bf16, 2, 2), std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_forward(ctx, y_bf16, l, qkv_view(s, qkv.data()), 2, 2), std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_block_forward(ctx, y_bf16, l, q_bf16, q_bf16, 2, 2,
                                                           kernels::AttentionBlock{0, 0, 8, true, true}),
                    std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_block_forward(ctx, y_view(s, y.data()), l, qkv_view(s, qkv.data()), q_bf16,
                                                           2, 2, kernels::AttentionBlock{0, 0, 8, true, true}),
                    std::logic_error);
  // dqkv's 16-bit copy is of q, k, v's own 16-bit type: none for f32 values, no other type.
  std::vector<float> dqkv(qkv.size()), dy(y.size());
  std::vector<uint16_t> copy_bits(qkv.size());
  const Tensor copy_bf16{copy_bits.data(), DType::bf16, Shape{1, 8, 48}, Device{}};
  const Tensor copy_fp16{copy_bits.data(), DType::fp16, Shape{1, 8, 48}, Device{}};
  BOOST_CHECK_THROW(kernels::flash_attention_backward(ctx, qkv_view(s, dqkv.data()), y_view(s, dy.data()),
                                                      qkv_view(s, qkv.data()), y_view(s, y.data()), l, 2, 2, copy_bf16),
                    std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_backward(ctx, qkv_view(s, dqkv.data()), y_view(s, dy.data()), q_bf16, y_bf16,
                                                      l, 2, 2, copy_fp16),
                    std::logic_error);
}

// Each thread's tiles are its part of one tracked workspace, kept at the largest need so far and
// grown to exactly what kernels::cpu_flash_attention_thread_floats declares for each of
// omp_get_max_threads() threads (what the memory model counts): a larger call — more heads of 128
// channels, more rows, 16-bit values widened tile by tile — grows it by the difference, a smaller
// one not at all. Sizes larger than any other test's, so that the first call sets the need.
BOOST_AUTO_TEST_CASE(its_thread_scratch_is_the_declared_tracked_workspace) {
  kernels::Context ctx;
  auto grow = [&](const Shape4& s) {
    std::vector<uint16_t> qkv(static_cast<size_t>(s.B) * s.T * 3 * s.C), y(static_cast<size_t>(s.B) * s.T * s.C);
    std::vector<float> lse(static_cast<size_t>(s.B) * s.NH * s.T), dqkv(qkv.size()), dy(y.size());
    const Tensor q{qkv.data(), DType::bf16, Shape{s.B, s.T, 3 * s.C}, Device{}};
    const Tensor o{y.data(), DType::bf16, Shape{s.B, s.T, s.C}, Device{}};
    const int64_t before = tracked(MemoryCategory::Workspace);
    kernels::flash_attention_forward(ctx, o, view(lse.data(), lse.size()), q, s.NH, s.NH);
    kernels::flash_attention_backward(ctx, qkv_view(s, dqkv.data()), y_view(s, dy.data()), q, o,
                                      view(lse.data(), lse.size()), s.NH, s.NH);
    return tracked(MemoryCategory::Workspace) - before;
  };
  const auto bytes = [](const Shape4& s) {
    return omp_get_max_threads() * int64_t(sizeof(float)) *
           kernels::cpu_flash_attention_thread_floats(s.C / s.NH, 3 * s.C, 3 * s.C, s.T, true);
  };
  const Shape4 smaller{1, 200, 1024, 8}, larger{1, 264, 1152, 9};
  grow(smaller);
  BOOST_TEST(grow(larger) == bytes(larger) - bytes(smaller));
  BOOST_TEST(grow(smaller) == 0);
  // By hand, with tiles of 128 rows: q and (k, v) widened at rows 3·128 channels longer, 64 more D.
  BOOST_TEST(bytes(larger) - bytes(smaller) == omp_get_max_threads() * int64_t(sizeof(float)) * (128 * 2 * 384 + 64));
}

// A block off the diagonal cannot be causal, and chunks must lie inside the T rows.
BOOST_AUTO_TEST_CASE(a_block_outside_the_sequence_is_refused) {
  std::vector<float> qkv(2 * 8 * 3 * 16), out(2 * 8 * 16), lse(2 * 2 * 8);
  kernels::Context ctx;
  const Tensor q = view(qkv.data(), Shape{2, 8, 48}), o = view(out.data(), Shape{2, 8, 16});
  const Tensor l = view(lse.data(), lse.size());
  BOOST_CHECK_THROW(kernels::flash_attention_block_forward(ctx, o, l, q, q, 2, 2, kernels::AttentionBlock{1, 0, 4, true}),
                    std::logic_error);
  BOOST_CHECK_THROW(kernels::flash_attention_block_forward(ctx, o, l, q, q, 2, 2, kernels::AttentionBlock{2, 0, 4, false}),
                    std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()
