// Causal multi-head attention by tiles, never holding the T×T scores (FlashAttention-2, Dao
// 2023, Algorithms 1 and 2), on the CPU: per (batch, head, tile of kTile queries), the key tiles
// up to the diagonal one at a time, each product of tiles one small GEMM (kernels/cpu/matmul.hpp:
// oneDNN's matmul, or with kernels.arithmetic = portable our fixed-order loops) reading q, k and
// v in place out of the fused (B, T, 3C) activation.
//
// Forward, for the rows of a query tile and each key tile j (scale = 1/√hs):
//   S = q kⱼᵀ · scale (keys after the row's position masked);  m' = max(m, rowmax S);
//   P = exp(S − m');  l = l · exp(m − m') + rowsum P;  acc = acc · exp(m − m') + P vⱼ;  m = m'
// then y = acc / l, and the row's log-sum-exp L = m + log l is kept for backward: (B, NH, T)
// floats instead of the (B, NH, T, T) probabilities.
// Backward recomputes each pair of tiles' P = exp(q kᵀ · scale − L) and, with D = rowsum(dy ⊙ y),
//   dv += Pᵀ dy;  dP = dy vᵀ;  dS = P ⊙ (dP − D) · scale;  dq += dS k;  dk += dSᵀ q
// one head on one thread, key tile by key tile, so that every gradient has one writer.
//
// Every sum runs in a fixed order (the tiles in order, each GEMM single-threaded inside the
// parallel loop), whatever the thread count: the same bits with 1 thread or 64.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/math.hpp"
#include "kernels/cpu/matmul.hpp"

namespace trident::kernels::cpu {
namespace {

constexpr int kTile = 128;  // queries and keys per tile

// Where one head's rows are: q, k, v inside qkv (B, T, 3C), y and dy inside (B, T, C), and the
// statistics inside (B, NH, T).
struct Head {
  int T, C, hs, NH, b, h;
  size_t qkv_row(int t) const { return (static_cast<size_t>(b) * T + t) * 3 * C + h * hs; }
  size_t out_row(int t) const { return (static_cast<size_t>(b) * T + t) * C + h * hs; }
  size_t stat(int t) const { return (static_cast<size_t>(b) * NH + h) * T + t; }
};

// Tiles as GEMM operands, in elements: rows of q, k or v (row stride 3C), the same read
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

// What a thread holds: a tile of scores or probabilities, one of their gradients, an output
// accumulator, and its rows' statistics.
struct Scratch {
  std::vector<float> s, ds, acc, m, l;
  explicit Scratch(int hs)
      : s(static_cast<size_t>(kTile) * kTile), ds(s.size()), acc(static_cast<size_t>(kTile) * hs), m(kTile), l(kTile) {}
};

// P of the tile pair (queries t0 .., keys s0 ..) in x.s from the kept log-sum-exps: the scores
// recomputed, masked after each query's position.
void probabilities(const Context& ctx, const Head& head, const float* qkv, const float* lse, int t0, int rows, int s0,
                   int cols, float scale, Scratch& x) {
  gemm(ctx, rows, cols, head.hs, x.s.data(), rows_of(kTile), qkv + head.qkv_row(t0), rows_of(3 * head.C),
       qkv + head.qkv_row(s0) + head.C, transposed(3 * head.C), false);
  for (int r = 0; r < rows; ++r) {
    const int visible = std::min(cols, t0 + r - s0 + 1);
    const float row_lse = lse[head.stat(t0 + r)];
    float* p = x.s.data() + static_cast<size_t>(r) * kTile;
    for (int c = 0; c < visible; ++c) p[c] = vexp(p[c] * scale - row_lse);
    for (int c = std::max(visible, 0); c < cols; ++c) p[c] = 0.0f;
  }
}

void forward_tile(const Context& ctx, const Head& head, const float* qkv, int t0, float scale, float* out, float* lse,
                  Scratch& x) {
  const int rows = std::min(kTile, head.T - t0), hs = head.hs;
  std::fill(x.acc.begin(), x.acc.end(), 0.0f);
  std::fill(x.m.begin(), x.m.end(), -INFINITY);
  std::fill(x.l.begin(), x.l.end(), 0.0f);
  for (int s0 = 0; s0 <= t0; s0 += kTile) {
    const int cols = std::min(kTile, head.T - s0);
    gemm(ctx, rows, cols, hs, x.s.data(), rows_of(kTile), qkv + head.qkv_row(t0), rows_of(3 * head.C),
         qkv + head.qkv_row(s0) + head.C, transposed(3 * head.C), false);
    for (int r = 0; r < rows; ++r) {
      const int visible = std::min(cols, t0 + r - s0 + 1);  // keys s0 .. t of this tile
      float* s = x.s.data() + static_cast<size_t>(r) * kTile;
      float row_max = x.m[r];
      for (int c = 0; c < visible; ++c) row_max = std::max(row_max, s[c] *= scale);
      const float correction = vexp(x.m[r] - row_max);  // 0 at the first tile (m = −∞)
      float sum = x.l[r] * correction;
      for (int c = 0; c < visible; ++c) sum += (s[c] = vexp(s[c] - row_max));
      for (int c = visible; c < cols; ++c) s[c] = 0.0f;
      float* a = x.acc.data() + static_cast<size_t>(r) * hs;
      for (int d = 0; d < hs; ++d) a[d] *= correction;
      x.m[r] = row_max;
      x.l[r] = sum;
    }
    gemm(ctx, rows, hs, cols, x.acc.data(), rows_of(hs), x.s.data(), rows_of(kTile), qkv + head.qkv_row(s0) + 2 * head.C,
         rows_of(3 * head.C), true);
  }
  for (int r = 0; r < rows; ++r) {
    const float inv = 1.0f / x.l[r];
    float* y = out + head.out_row(t0 + r);
    for (int d = 0; d < hs; ++d) y[d] = x.acc[static_cast<size_t>(r) * hs + d] * inv;
    lse[head.stat(t0 + r)] = x.m[r] + std::log(x.l[r]);
  }
}

// Every gradient of one head: dq, dk, dv (zeroed here, then summed over the tile pairs, key
// tile by key tile).
void head_gradients(const Context& ctx, const Head& head, const float* qkv, const float* dout, const float* out,
                    const float* lse, float scale, float* dqkv, Scratch& x, std::vector<float>& d_rows) {
  const int T = head.T, hs = head.hs;
  const int64_t q_stride = 3 * head.C;
  for (int t = 0; t < T; ++t) {
    float* row = dqkv + head.qkv_row(t);
    for (int part = 0; part < 3; ++part) std::fill(row + part * head.C, row + part * head.C + hs, 0.0f);
    const float* dy = dout + head.out_row(t);
    const float* y = out + head.out_row(t);
    float dot = 0.0f;
    for (int d = 0; d < hs; ++d) dot += dy[d] * y[d];
    d_rows[t] = dot;  // D = rowsum(dy ⊙ y)
  }
  for (int s0 = 0; s0 < T; s0 += kTile) {
    const int cols = std::min(kTile, T - s0);
    const float* k = qkv + head.qkv_row(s0) + head.C;
    const float* v = k + head.C;
    float* dk = dqkv + head.qkv_row(s0) + head.C;
    float* dv = dk + head.C;
    for (int t0 = s0 / kTile * kTile; t0 < T; t0 += kTile) {
      const int rows = std::min(kTile, T - t0);
      const float* q = qkv + head.qkv_row(t0);
      const float* dy = dout + head.out_row(t0);
      probabilities(ctx, head, qkv, lse, t0, rows, s0, cols, scale, x);
      gemm(ctx, cols, hs, rows, dv, rows_of(q_stride), x.s.data(), transposed(kTile), dy, rows_of(head.C), true);
      gemm(ctx, rows, cols, hs, x.ds.data(), rows_of(kTile), dy, rows_of(head.C), v, transposed(q_stride), false);
      for (int r = 0; r < rows; ++r) {  // dS = P ⊙ (dP − D) · scale
        const float* p = x.s.data() + static_cast<size_t>(r) * kTile;
        float* ds = x.ds.data() + static_cast<size_t>(r) * kTile;
        const float d_row = d_rows[t0 + r];
        for (int c = 0; c < cols; ++c) ds[c] = p[c] * (ds[c] - d_row) * scale;
      }
      gemm(ctx, rows, hs, cols, dqkv + head.qkv_row(t0), rows_of(q_stride), x.ds.data(), rows_of(kTile), k,
           rows_of(q_stride), true);
      gemm(ctx, cols, hs, rows, dk, rows_of(q_stride), x.ds.data(), transposed(kTile), q, rows_of(q_stride), true);
    }
  }
}

}  // namespace

void flash_attention_forward(Context& ctx, float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH, tiles = (T + kTile - 1) / kTile;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    Scratch x(hs);
#pragma omp for collapse(3) schedule(dynamic)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < tiles; ++i) forward_tile(ctx, Head{T, C, hs, NH, b, h}, qkv, i * kTile, scale, out, lse, x);
  }
}

void flash_attention_backward(Context& ctx, float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    Scratch x(hs);
    std::vector<float> d_rows(static_cast<size_t>(T));
#pragma omp for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        head_gradients(ctx, Head{T, C, hs, NH, b, h}, qkv, dout, out, lse, scale, dqkv, x, d_rows);
  }
}

}  // namespace trident::kernels::cpu
