// Causal multi-head attention by tiles, never holding the T×T scores (FlashAttention-2, Dao
// 2023, Algorithms 1 and 2), on the CPU: per (batch, head, tile of kTile queries), the key tiles
// up to the diagonal one at a time, each product of tiles one small GEMM (kernels/cpu/matmul.hpp:
// oneDNN's matmul, or with kernels.arithmetic = portable our fixed-order loops) reading q, k and
// v in place out of the fused (B, T, (NH + 2·KV)·hs) activation. Grouped-query attention reads
// its heads as they are: query head h against key/value head h / (NH / KV), no expanded copy.
//
// Forward, for the rows of a query tile and each key tile j (scale = 1/√hs):
//   S = q kⱼᵀ · scale (keys after the row's position masked);  m' = max(m, rowmax S);
//   P = exp(S − m');  l = l · exp(m − m') + rowsum P;  acc = acc · exp(m − m') + P vⱼ;  m = m'
// then y = acc / l, and the row's log-sum-exp L = m + log l is kept for backward: (B, NH, T)
// floats instead of the (B, NH, T, T) probabilities.
// Backward recomputes each pair of tiles' P = exp(q kᵀ · scale − L) and, with D = rowsum(dy ⊙ y),
//   dv += Pᵀ dy;  dP = dy vᵀ;  dS = P ⊙ (dP − D) · scale;  dq += dS k;  dk += dSᵀ q
// one key/value head on one thread — the query heads of its group in turn, each key tile by key
// tile — so that every gradient has one writer; where a rank's B·KV key/value heads are fewer
// than its threads, the same sums in two passes over tiles (dk and dv per key tile, dq per query
// tile), each pair's P and dS computed in both: the same bits, more work items.
//
// q, k and v are read as they are stored: f32 in place, or a 16-bit model's kept values widened
// (exactly) tile by tile into the thread's scratch — the same f32 products on the same values, so
// the same bits, without an f32 copy of the activation. y is written f32 or rounded to the values'
// 16-bit type (to nearest even, as store rounds), and backward reads it either way.
//
// Every sum runs in a fixed order (the tiles in order, each GEMM single-threaded inside the
// parallel loop), whatever the thread count: the same bits with 1 thread or 64.
//
// Context parallelism's ring attention runs the same tiles on a block: one chunk of a
// sequence's queries against one chunk of keys and values, which may come from another rank
// (k and v in a (B, T, 2·KV·hs) buffer, or in the qkv itself), causal on the diagonal chunk and
// unmasked below it; the forward folds the block's softmax into what out and lse hold
// (L' = log(e^L + e^Lb), y' = y·e^(L−L') + yb·e^(Lb−L')), the backward adds to the gradients
// from the final out and lse. The whole sequence is the block of one chunk, keys = queries.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/common/low16.hpp"
#include "kernels/common/math.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/workspace.hpp"
#include "tensor/low16.hpp"

namespace trident::kernels::cpu {
namespace {

constexpr int kTile = 128;  // queries and keys per tile

// Where one query head's rows of a block are, for queries t in [0, Tq) and keys s in [0, Tk) of
// the block (sequence rows q0 + t and k0 + s of T): q inside qkv (B, T, Wq = C + 2·Ckv), its
// key/value head g's k and v inside kv (B, T, W) at columns W − 2·Ckv and W − Ckv (Ckv = KV·hs),
// y and dy inside (B, T, C), the statistics inside (B, NH, T). causal: key s visible to query t
// where s ≤ t (Tq = Tk); else every key.
struct Head {
  int T, C, hs, NH, b, h, g, Ckv;
  int q0, Tq, k0, Tk, W;
  bool causal;
  int64_t q_stride() const { return C + 2 * int64_t(Ckv); }
  size_t qkv_row(int t) const { return (static_cast<size_t>(b) * T + q0 + t) * q_stride() + h * hs; }
  size_t k_row(int s) const { return (static_cast<size_t>(b) * T + k0 + s) * W + (W - 2 * Ckv) + g * hs; }
  size_t out_row(int t) const { return (static_cast<size_t>(b) * T + q0 + t) * C + h * hs; }
  size_t stat(int t) const { return (static_cast<size_t>(b) * NH + h) * T + q0 + t; }
  int visible(int t, int s0, int cols) const { return causal ? std::min(cols, t - s0 + 1) : cols; }
  int key_end(int t0) const { return causal ? std::min(Tk, t0 + 1) : Tk; }  // key tiles start below it
  int query_start(int s0) const { return causal ? s0 / kTile * kTile : 0; }
};

// Tiles as GEMM operands, in elements: rows of q, k or v (row stride Wq or W), the same read
// transposed, rows of y or dy (stride C), and a dense scratch tile (stride kTile or hs).
Strides rows_of(int64_t stride) { return {0, 0, stride, 1}; }
Strides transposed(int64_t stride) { return {0, 0, 1, stride}; }

// A (rows, cols) operand's strides with its batch and head strides set to its extent: one matrix,
// which oneDNN then sees in a plain row- or column-major layout (zero strides there send it to its
// reference implementation).
Strides one_matrix(Strides s, int64_t rows, int64_t cols) {
  const int64_t extent = (rows - 1) * s.row + (cols - 1) * s.col + 1;
  return {extent, extent, s.row, s.col};
}

// c (M, N) (= or +=) a (M, K) · b (K, N), one matrix.
void gemm(const Context& ctx, int M, int N, int K, float* c, Strides cs, const float* a, Strides as, const float* b,
          Strides bs, bool accumulate) {
  if (M == 0 || N == 0 || K == 0) return;
  run_gemm(ctx,
           Gemm{1, 1, M, N, K, one_matrix(as, M, K), one_matrix(bs, K, N), one_matrix(cs, M, N), accumulate, false,
                OperandType::f32},
           c, a, b);
}

// What a thread holds, its part of the call's workspace (kernels/cpu/workspace.hpp): a tile of
// scores or probabilities and one of their gradients (kTile × kTile), an output accumulator
// (kTile × hs), its rows' statistics m and l, in 16 bits the q tile and the k and v tiles widened
// (kTile rows of their source's row stride; k and v share theirs, v Ckv columns after k as in the
// source), and in backward D of each query row of the block.
struct Scratch {
  float *s, *ds, *acc, *m, *l, *q, *kv, *d_rows;
};

// The parts' offsets in floats, and their sum: one thread's floats.
struct ScratchLayout {
  size_t s, ds, acc, m, l, q, kv, d_rows, floats;
};
ScratchLayout scratch_layout(int hs, int64_t q_stride, int64_t kv_stride, int rows, bool low16) {
  ScratchLayout o{};
  size_t at = 0;
  auto take = [&at](int64_t n) {
    const size_t first = at;
    at += static_cast<size_t>(n);
    return first;
  };
  o.s = take(int64_t(kTile) * kTile);
  o.ds = take(int64_t(kTile) * kTile);
  o.acc = take(int64_t(kTile) * hs);
  o.m = take(kTile);
  o.l = take(kTile);
  o.q = take(low16 ? kTile * q_stride : 0);
  o.kv = take(low16 ? kTile * kv_stride : 0);
  o.d_rows = take(rows);
  o.floats = at;
  return o;
}

// The call's workspace, a part for each thread, laid out alike forward and backward.
struct ThreadParts {
  PerThread parts;
  ScratchLayout o;
  Scratch mine() const {  // the calling thread's
    float* at = parts.mine();
    return {at + o.s, at + o.ds, at + o.acc, at + o.m, at + o.l, at + o.q, at + o.kv, at + o.d_rows};
  }
};
ThreadParts thread_parts(const FlashOperands& in, int C, int NH, const AttentionBlock& block) {
  static Buffer<float> workspace;
  const int hs = C / NH;
  const ScratchLayout o =
      scratch_layout(hs, C + 2 * int64_t(in.KV) * hs, in.W, block.rows, in.values != Precision::fp32);
  return {per_thread(workspace, o.floats), o};
}

// A tile of q, k or v as an f32 GEMM operand: its first row and row stride.
struct Rows {
  const float* at;
  int64_t stride;
};

float widen(Precision type, low16 value) { return type == Precision::bf16 ? bf16_widen(value) : fp16_widen(value); }
low16 rounded(Precision type, float value) { return type == Precision::bf16 ? bf16_round(value) : fp16_round(value); }

// Exact widenings the compiler vectorizes (Bf16's shift; Fp16's F16C conversion, where
// fp16_widen's bit arithmetic loops over subnormals): a tile's rows are widened again for every
// tile they meet, so this loop is in the attention's inner loop.
template <class Type>
void widen_rows(float* into, const low16* from, int count, int hs, int64_t stride) {
  for (int r = 0; r < count; ++r) {
    float* to = into + r * stride;
    const low16* row = from + r * stride;
#pragma omp simd
    for (int d = 0; d < hs; ++d) to[d] = Type::widen(row[d]);
  }
}

// `count` rows of hs values from element `first` of `values` (row stride `stride`): in place where
// they are f32, else widened into `into` (kTile rows) at the same row stride — oneDNN picks its
// kernel, and so its order of summation, by the operands' strides: the same strides, the same bits.
Rows tile_rows(const FlashOperands& in, const void* values, size_t first, int64_t stride, int count, int hs,
               float* into) {
  if (in.values == Precision::fp32) return {static_cast<const float*>(values) + first, stride};
  const low16* from = static_cast<const low16*>(values) + first;
  if (in.values == Precision::fp16) widen_rows<Fp16>(into, from, count, hs, stride);
  else widen_rows<Bf16>(into, from, count, hs, stride);
  return {into, stride};
}

// The rows of one head's tiles: queries t0 .. (from qkv), keys or values s0 .. (from kv).
Rows query_rows(const FlashOperands& in, const Head& head, int t0, int rows, const Scratch& x) {
  return tile_rows(in, in.qkv, head.qkv_row(t0), head.q_stride(), rows, head.hs, x.q);
}
Rows key_rows(const FlashOperands& in, const Head& head, int s0, int cols, const Scratch& x) {
  return tile_rows(in, in.kv, head.k_row(s0), head.W, cols, head.hs, x.kv);
}
Rows value_rows(const FlashOperands& in, const Head& head, int s0, int cols, const Scratch& x) {
  return tile_rows(in, in.kv, head.k_row(s0) + head.Ckv, head.W, cols, head.hs, x.kv + head.Ckv);
}

// Element i of y (f32 or the values' 16-bit type).
float y_at(const FlashOperands& in, const void* out, size_t i) {
  return in.y_low ? widen(in.values, static_cast<const low16*>(out)[i]) : static_cast<const float*>(out)[i];
}

// P of the tile pair (queries q, keys k) in x.s from the kept log-sum-exps: the scores
// recomputed, masked after each query's position.
void probabilities(const Context& ctx, const Head& head, Rows q, Rows k, const float* lse, int t0, int rows, int s0,
                   int cols, float scale, const Scratch& x) {
  gemm(ctx, rows, cols, head.hs, x.s, rows_of(kTile), q.at, rows_of(q.stride), k.at, transposed(k.stride),
       false);
  for (int r = 0; r < rows; ++r) {
    const int visible = head.visible(t0 + r, s0, cols);
    const float row_lse = lse[head.stat(t0 + r)];
    float* p = x.s + static_cast<size_t>(r) * kTile;
    for (int c = 0; c < visible; ++c) p[c] = vexp(p[c] * scale - row_lse);
    for (int c = std::max(visible, 0); c < cols; ++c) p[c] = 0.0f;
  }
}

// The tile's rows of y = acc / l and their log-sum-exps, or (combine: out f32) folded into what
// out and lse hold.
void write_rows(const FlashOperands& in, const Head& head, int t0, int rows, void* out, float* lse, bool combine,
                const Scratch& x) {
  const int hs = head.hs;
  for (int r = 0; r < rows; ++r) {
    const size_t at = head.out_row(t0 + r);
    float& row_lse = lse[head.stat(t0 + r)];
    const float block_lse = x.m[r] + std::log(x.l[r]);
    const float* acc = x.acc + static_cast<size_t>(r) * hs;
    if (!combine) {
      const float inv = 1.0f / x.l[r];
      if (!in.y_low) {
        float* y = static_cast<float*>(out) + at;
        for (int d = 0; d < hs; ++d) y[d] = acc[d] * inv;
      } else {
        low16* y = static_cast<low16*>(out) + at;
        for (int d = 0; d < hs; ++d) y[d] = rounded(in.values, acc[d] * inv);
      }
      row_lse = block_lse;
      continue;
    }
    float* y = static_cast<float*>(out) + at;
    const float top = std::max(row_lse, block_lse);
    const float merged = top + std::log(vexp(row_lse - top) + vexp(block_lse - top));
    const float keep = vexp(row_lse - merged), add = vexp(block_lse - merged) / x.l[r];
    for (int d = 0; d < hs; ++d) y[d] = y[d] * keep + acc[d] * add;
    row_lse = merged;
  }
}

void forward_tile(const Context& ctx, const FlashOperands& in, const Head& head, int t0, float scale, void* out,
                  float* lse, bool combine, const Scratch& x) {
  const int rows = std::min(kTile, head.Tq - t0), hs = head.hs;
  std::fill(x.acc, x.acc + static_cast<size_t>(kTile) * hs, 0.0f);
  std::fill(x.m, x.m + kTile, -INFINITY);
  std::fill(x.l, x.l + kTile, 0.0f);
  const Rows q = query_rows(in, head, t0, rows, x);
  for (int s0 = 0; s0 < head.key_end(t0); s0 += kTile) {
    const int cols = std::min(kTile, head.Tk - s0);
    const Rows k = key_rows(in, head, s0, cols, x), v = value_rows(in, head, s0, cols, x);
    gemm(ctx, rows, cols, hs, x.s, rows_of(kTile), q.at, rows_of(q.stride), k.at, transposed(k.stride), false);
    for (int r = 0; r < rows; ++r) {
      const int visible = head.visible(t0 + r, s0, cols);  // keys s0 .. t of this tile (all: unmasked)
      float* s = x.s + static_cast<size_t>(r) * kTile;
      float row_max = x.m[r];
      for (int c = 0; c < visible; ++c) row_max = std::max(row_max, s[c] *= scale);
      const float correction = vexp(x.m[r] - row_max);  // 0 at the first tile (m = −∞)
      float sum = x.l[r] * correction;
      for (int c = 0; c < visible; ++c) sum += (s[c] = vexp(s[c] - row_max));
      for (int c = visible; c < cols; ++c) s[c] = 0.0f;
      float* a = x.acc + static_cast<size_t>(r) * hs;
      for (int d = 0; d < hs; ++d) a[d] *= correction;
      x.m[r] = row_max;
      x.l[r] = sum;
    }
    gemm(ctx, rows, hs, cols, x.acc, rows_of(hs), x.s, rows_of(kTile), v.at, rows_of(v.stride), true);
  }
  write_rows(in, head, t0, rows, out, lse, combine, x);
}

// `count` rows of hs gradients from element `first` (row stride `stride`): zeroed, or rounded
// into dqkv_low at the same elements.
void zero_rows(float* gradients, size_t first, int64_t stride, int count, int hs) {
  for (int r = 0; r < count; ++r) std::fill_n(gradients + first + r * stride, hs, 0.0f);
}
void round_rows(const FlashOperands& in, const float* gradients, low16* dqkv_low, size_t first, int64_t stride,
                int count, int hs) {
  for (int r = 0; r < count; ++r)
    for (int d = 0; d < hs; ++d) {
      const size_t at = first + r * stride + d;
      dqkv_low[at] = rounded(in.values, gradients[at]);
    }
}

// The same for key rows [s0, s0 + count) of the head's key/value head: its dk and its dv.
void zero_key_values(const Head& head, float* dkv, int s0, int count) {
  for (const int64_t v : {int64_t{0}, int64_t(head.Ckv)}) zero_rows(dkv, head.k_row(s0) + v, head.W, count, head.hs);
}
void round_key_values(const FlashOperands& in, const Head& head, const float* dkv, low16* dqkv_low, int s0,
                      int count) {
  for (const int64_t v : {int64_t{0}, int64_t(head.Ckv)})
    round_rows(in, dkv, dqkv_low, head.k_row(s0) + v, head.W, count, head.hs);
}

// D = rowsum(dy ⊙ y) of the head's query rows [first, last), into x.d_rows at their indices.
void delta_rows(const FlashOperands& in, const Head& head, const float* dout, const void* out, int first, int last,
                const Scratch& x) {
  for (int t = first; t < last; ++t) {
    const float* dy = dout + head.out_row(t);
    float dot = 0.0f;
    for (int d = 0; d < head.hs; ++d) dot += dy[d] * y_at(in, out, head.out_row(t) + d);
    x.d_rows[t] = dot;
  }
}

// A pair of tiles (queries t0.., keys s0..): P into x.s, recomputed from the kept log-sum-exps,
// and dS = P ⊙ (dP − D) · scale into x.ds, dP = dy vᵀ.
void pair_gradients(const Context& ctx, const Head& head, Rows q, Rows k, Rows v, const float* dy, const float* lse,
                    int t0, int rows, int s0, int cols, float scale, const Scratch& x) {
  probabilities(ctx, head, q, k, lse, t0, rows, s0, cols, scale, x);
  gemm(ctx, rows, cols, head.hs, x.ds, rows_of(kTile), dy, rows_of(head.C), v.at, transposed(v.stride), false);
  for (int r = 0; r < rows; ++r) {
    const float* p = x.s + static_cast<size_t>(r) * kTile;
    float* ds = x.ds + static_cast<size_t>(r) * kTile;
    const float d_row = x.d_rows[t0 + r];
    for (int c = 0; c < cols; ++c) ds[c] = p[c] * (ds[c] - d_row) * scale;
  }
}

// The pair's shares of dv += Pᵀ dy and dk += dSᵀ q (key rows s0..), and of dq += dS k (query rows t0..).
void add_key_gradients(const Context& ctx, const Head& head, Rows q, const float* dy, int rows, int cols, float* dk,
                       const Scratch& x) {
  gemm(ctx, cols, head.hs, rows, dk + head.Ckv, rows_of(head.W), x.s, transposed(kTile), dy, rows_of(head.C), true);
  gemm(ctx, cols, head.hs, rows, dk, rows_of(head.W), x.ds, transposed(kTile), q.at, rows_of(q.stride), true);
}
void add_query_gradients(const Context& ctx, const Head& head, Rows k, int rows, int cols, float* dq,
                         const Scratch& x) {
  gemm(ctx, rows, head.hs, cols, dq, rows_of(head.q_stride()), x.ds, rows_of(kTile), k.at, rows_of(k.stride), true);
}

// The pairs of key tile s0 (its k and v rows) with the query tiles of `head` that see it: their
// shares of dk and dv (key rows s0.. at dk) and, where dqkv is given, of dq.
void key_tile_pairs(const Context& ctx, const FlashOperands& in, const Head& head, int s0, int cols, Rows k, Rows v,
                    const float* dout, const float* lse, float scale, float* dk, float* dqkv, const Scratch& x) {
  for (int t0 = head.query_start(s0); t0 < head.Tq; t0 += kTile) {
    const int rows = std::min(kTile, head.Tq - t0);
    const Rows q = query_rows(in, head, t0, rows, x);
    const float* dy = dout + head.out_row(t0);
    pair_gradients(ctx, head, q, k, v, dy, lse, t0, rows, s0, cols, scale, x);
    add_key_gradients(ctx, head, q, dy, rows, cols, dk, x);
    if (dqkv != nullptr) add_query_gradients(ctx, head, k, rows, cols, dqkv + head.qkv_row(t0), x);
  }
}

// One query head's part of its block's gradients in one pass: dq into dqkv, and its share of its
// key/value head's dk and dv added into dkv (of kv's layout), summed over the tile pairs key tile
// by key tile; accumulate: dq added to what it holds, else zeroed first.
void head_gradients(const Context& ctx, const FlashOperands& in, const Head& head, const float* dout, const void* out,
                    const float* lse, float scale, float* dqkv, float* dkv, bool accumulate, const Scratch& x) {
  if (!accumulate) zero_rows(dqkv, head.qkv_row(0), head.q_stride(), head.Tq, head.hs);
  delta_rows(in, head, dout, out, 0, head.Tq, x);
  for (int s0 = 0; s0 < head.Tk; s0 += kTile) {
    const int cols = std::min(kTile, head.Tk - s0);
    const Rows k = key_rows(in, head, s0, cols, x), v = value_rows(in, head, s0, cols, x);
    key_tile_pairs(ctx, in, head, s0, cols, k, v, dout, lse, scale, dkv + head.k_row(s0), dqkv, x);
  }
}

// The block's rows of query head h of sequence b: chunk `block` of the T rows of each sequence.
Head block_head(const FlashOperands& in, int b, int h, int T, int C, int NH, const AttentionBlock& block) {
  const int hs = C / NH;
  return Head{T, C, hs, NH, b, h, h / (NH / in.KV), in.KV * hs, block.q_chunk * block.rows, block.rows,
              block.k_chunk * block.rows, block.rows, in.W, block.causal};
}

// Every gradient of key/value head g's block: dk and dv (kv's columns in dkv) summed over the
// query heads of its group in order, each head's dq; accumulate: added to what they hold, else
// zeroed first (the whole sequence, dkv = dqkv), and then (dqkv_low) rounded into it.
void group_gradients(const Context& ctx, const FlashOperands& in, int b, int g, int T, int C, int NH,
                     const AttentionBlock& block, const float* dout, const void* out, const float* lse, float scale,
                     float* dqkv, float* dkv, bool accumulate, low16* dqkv_low, const Scratch& x) {
  const int group = NH / in.KV;
  const Head first = block_head(in, b, g * group, T, C, NH, block);
  if (!accumulate) zero_key_values(first, dkv, 0, first.Tk);
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const Head head = block_head(in, b, h, T, C, NH, block);
    head_gradients(ctx, in, head, dout, out, lse, scale, dqkv, dkv, accumulate, x);
    if (dqkv_low != nullptr) round_rows(in, dqkv, dqkv_low, head.qkv_row(0), head.q_stride(), head.Tq, head.hs);
  }
  if (dqkv_low != nullptr) round_key_values(in, first, dkv, dqkv_low, 0, first.Tk);
}

// The same sums in two passes, for more work items than key/value heads: the keys' pass, per key
// tile of key/value head g, dk and dv over its group's query heads and their query tiles that see
// it; the queries' pass, per query tile of head h, dq over the key tiles it sees. Each gradient
// gets the same additions in the same order as in head_gradients (dk and dv: head by head, query
// tile by query tile; dq: key tile by key tile) from the same pair_gradients — the same bits —
// at the price of recomputing each pair's P and dS in both passes.
void key_tile_gradients(const Context& ctx, const FlashOperands& in, int b, int g, int s0, int T, int C, int NH,
                        const AttentionBlock& block, const float* dout, const void* out, const float* lse,
                        float scale, float* dkv, bool accumulate, low16* dqkv_low, const Scratch& x) {
  const int group = NH / in.KV;
  const Head first = block_head(in, b, g * group, T, C, NH, block);
  const int cols = std::min(kTile, first.Tk - s0);
  float* dk = dkv + first.k_row(s0);
  if (!accumulate) zero_key_values(first, dkv, s0, cols);
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const Head head = block_head(in, b, h, T, C, NH, block);
    delta_rows(in, head, dout, out, head.query_start(s0), head.Tq, x);
    const Rows k = key_rows(in, head, s0, cols, x), v = value_rows(in, head, s0, cols, x);
    key_tile_pairs(ctx, in, head, s0, cols, k, v, dout, lse, scale, dk, nullptr, x);
  }
  if (dqkv_low != nullptr) round_key_values(in, first, dkv, dqkv_low, s0, cols);
}

void query_tile_gradients(const Context& ctx, const FlashOperands& in, int b, int h, int t0, int T, int C, int NH,
                          const AttentionBlock& block, const float* dout, const void* out, const float* lse,
                          float scale, float* dqkv, bool accumulate, low16* dqkv_low, const Scratch& x) {
  const Head head = block_head(in, b, h, T, C, NH, block);
  const int rows = std::min(kTile, head.Tq - t0);
  if (!accumulate) zero_rows(dqkv, head.qkv_row(t0), head.q_stride(), rows, head.hs);
  delta_rows(in, head, dout, out, t0, t0 + rows, x);
  const Rows q = query_rows(in, head, t0, rows, x);
  const float* dy = dout + head.out_row(t0);
  for (int s0 = 0; s0 < head.key_end(t0); s0 += kTile) {
    const int cols = std::min(kTile, head.Tk - s0);
    const Rows k = key_rows(in, head, s0, cols, x), v = value_rows(in, head, s0, cols, x);
    pair_gradients(ctx, head, q, k, v, dy, lse, t0, rows, s0, cols, scale, x);
    add_query_gradients(ctx, head, k, rows, cols, dqkv + head.qkv_row(t0), x);
  }
  if (dqkv_low != nullptr) round_rows(in, dqkv, dqkv_low, head.qkv_row(t0), head.q_stride(), rows, head.hs);
}

}  // namespace

void flash_attention_forward(Context& ctx, const FlashOperands& in, void* out, float* lse, int B, int T, int C, int NH,
                             const AttentionBlock& block, bool combine) {
  if (combine && in.y_low) throw std::logic_error("kernels::cpu: a flash attention block folded into a 16-bit output");
  const int hs = C / NH, tiles = (block.rows + kTile - 1) / kTile;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const ThreadParts parts = thread_parts(in, C, NH, block);
#pragma omp parallel
  {
    const Scratch x = parts.mine();
#pragma omp for collapse(3) schedule(dynamic)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < tiles; ++i)
          forward_tile(ctx, in, block_head(in, b, h, T, C, NH, block), i * kTile, scale, out, lse, combine, x);
  }
}

void flash_attention_backward(Context& ctx, const FlashOperands& in, float* dqkv, float* dkv, const float* dout,
                              const void* out, const float* lse, int B, int T, int C, int NH,
                              const AttentionBlock& block, bool accumulate, low16* dqkv_low) {
  if (dqkv_low != nullptr && (accumulate || dkv != dqkv))
    throw std::logic_error("kernels::cpu: a 16-bit copy of the flash attention's gradients of a block");
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const ThreadParts parts = thread_parts(in, C, NH, block);
  // One pass a key/value head where they keep the threads busy; else the two passes' tiles.
  const bool by_tiles = int64_t(B) * in.KV < omp_get_max_threads();
  const int tiles = (block.rows + kTile - 1) / kTile;
#pragma omp parallel
  {
    const Scratch x = parts.mine();
    if (!by_tiles) {
#pragma omp for collapse(2) schedule(dynamic)
      for (int b = 0; b < B; ++b)
        for (int g = 0; g < in.KV; ++g)
          group_gradients(ctx, in, b, g, T, C, NH, block, dout, out, lse, scale, dqkv, dkv, accumulate, dqkv_low, x);
    } else {
#pragma omp for collapse(3) schedule(dynamic) nowait
      for (int b = 0; b < B; ++b)
        for (int g = 0; g < in.KV; ++g)
          for (int i = 0; i < tiles; ++i)
            key_tile_gradients(ctx, in, b, g, i * kTile, T, C, NH, block, dout, out, lse, scale, dkv, accumulate,
                               dqkv_low, x);
#pragma omp for collapse(3) schedule(dynamic)
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
          for (int i = 0; i < tiles; ++i)
            query_tile_gradients(ctx, in, b, h, i * kTile, T, C, NH, block, dout, out, lse, scale, dqkv, accumulate,
                                 dqkv_low, x);
    }
  }
}

}  // namespace trident::kernels::cpu

namespace trident::kernels {

int64_t cpu_flash_attention_thread_floats(int hs, int64_t q_stride, int64_t kv_stride, int rows, bool low16) {
  return static_cast<int64_t>(cpu::scratch_layout(hs, q_stride, kv_stride, rows, low16).floats);
}

}  // namespace trident::kernels
