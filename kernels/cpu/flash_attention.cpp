// Causal multi-head attention by tiles, never holding the T×T scores (FlashAttention-2, Dao
// 2023, Algorithms 1 and 2), on the CPU: per (batch, head, tile of kTile queries), the key tiles
// up to the diagonal one at a time.
//
// Forward, for the rows r of a query tile and each key tile j (scale = 1/√hs):
//   S = q kⱼᵀ · scale (keys after the row's position masked);  m' = max(m, rowmax S);
//   P = exp(S − m');  l = l · exp(m − m') + rowsum P;  acc = acc · exp(m − m') + P vⱼ;  m = m'
// then y = acc / l, and the row's log-sum-exp L = m + log l is kept for backward: (B, NH, T)
// floats instead of the (B, NH, T, T) probabilities.
// Backward recomputes each tile's P = exp(q kᵀ · scale − L) and, with D = rowsum(dy ⊙ y),
//   dv += Pᵀ dy;  dP = dy vᵀ;  dS = P ⊙ (dP − D);  dq += dS k · scale;  dk += dSᵀ q · scale
// over each head's key tiles (dk, dv summed over the queries at and after them, and dq over the
// keys up to each query). With fewer heads than threads, in two passes so that a head's tiles
// spread over the threads with one writer per output row: key tiles (dk, dv), then query tiles
// (dq), each recomputing P.
//
// The products of a row with a tile's keys run along the keys (k and v tiles transposed, so the
// loops vectorize over keys or channels, element by element) and each sums over the channels in
// order; every sum runs in a fixed order whatever the thread count or vector width: the same bits
// with 1 thread or 64, on AVX2 or AVX-512.
#include <algorithm>
#include <cmath>
#include <vector>

#include <omp.h>

#include "kernels/common/math.hpp"
#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {
namespace {

constexpr int kTile = 64;  // queries and keys per tile: S is 16 KiB, in the L1 cache

// q, k, v of one head inside the fused (B, T, 3C) activation, and y (or dy) inside (B, T, C).
struct Head {
  const float* qkv;
  int T, C, hs;
  int b, h;
  const float* q(int t) const { return qkv + (static_cast<size_t>(b) * T + t) * 3 * C + h * hs; }
  const float* k(int t) const { return q(t) + C; }
  const float* v(int t) const { return q(t) + 2 * C; }
  size_t row(int t) const { return (static_cast<size_t>(b) * T + t) * C + h * hs; }  // in (B, T, C)
  size_t stat(int t) const { return (static_cast<size_t>(b) * (C / hs) + h) * T + t; }  // in (B, NH, T)
};

float dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

void add_scaled(float* into, float factor, const float* x, int n) {
#pragma omp simd
  for (int d = 0; d < n; ++d) into[d] += factor * x[d];
}

// A tile's rows of k (or v) transposed, (hs, kTile): the products of one query with every key of
// the tile then run along the keys, vectorized, each summed over the channels in order.
void transpose_tile(const Head& head, int s0, int cols, int offset, std::vector<float>& tile) {
  for (int c = 0; c < cols; ++c) {
    const float* row = head.q(s0 + c) + offset;
    for (int d = 0; d < head.hs; ++d) tile[static_cast<size_t>(d) * kTile + c] = row[d];
  }
}

// out[c] = x · tile[:, c] for c < cols: one row against a transposed tile.
void row_times_tile(const float* x, const std::vector<float>& tile, int hs, int cols, float* out) {
  std::fill(out, out + cols, 0.0f);
  for (int d = 0; d < hs; ++d) {
    const float xd = x[d];
    const float* t = tile.data() + static_cast<size_t>(d) * kTile;
#pragma omp simd
    for (int c = 0; c < cols; ++c) out[c] += xd * t[c];
  }
}

// What every tile loop holds per thread: the transposed k and v tiles and a row of scores.
struct Scratch {
  std::vector<float> kt, vt, scores, dp;
  explicit Scratch(int hs)
      : kt(static_cast<size_t>(hs) * kTile), vt(static_cast<size_t>(hs) * kTile), scores(kTile), dp(kTile) {}
};

// One query tile's output rows and their log-sum-exps, over the key tiles up to the diagonal.
void forward_tile(const Head& head, int t0, float scale, float* out, float* lse, Scratch& x, std::vector<float>& acc,
                  std::vector<float>& m, std::vector<float>& l) {
  const int rows = std::min(kTile, head.T - t0), hs = head.hs;
  std::fill(acc.begin(), acc.end(), 0.0f);
  std::fill(m.begin(), m.end(), -INFINITY);
  std::fill(l.begin(), l.end(), 0.0f);
  for (int s0 = 0; s0 <= t0; s0 += kTile) {
    const int cols = std::min(kTile, head.T - s0);
    transpose_tile(head, s0, cols, head.C, x.kt);
    for (int r = 0; r < rows; ++r) {
      const int t = t0 + r, visible = std::min(cols, t - s0 + 1);  // keys s0 .. t of this tile
      float* s = x.scores.data();
      row_times_tile(head.q(t), x.kt, hs, visible, s);
      float row_max = m[r];
      for (int c = 0; c < visible; ++c) row_max = std::max(row_max, s[c] *= scale);
      const float correction = vexp(m[r] - row_max);  // 0 at the first tile (m = −∞)
      float* a = acc.data() + static_cast<size_t>(r) * hs;
      float sum = l[r] * correction;
      for (int d = 0; d < hs; ++d) a[d] *= correction;
      for (int c = 0; c < visible; ++c) {
        const float p = vexp(s[c] - row_max);
        sum += p;
        add_scaled(a, p, head.v(s0 + c), hs);
      }
      m[r] = row_max;
      l[r] = sum;
    }
  }
  for (int r = 0; r < rows; ++r) {
    const float inv = 1.0f / l[r];
    float* y = out + head.row(t0 + r);
    for (int d = 0; d < hs; ++d) y[d] = acc[static_cast<size_t>(r) * hs + d] * inv;
    lse[head.stat(t0 + r)] = m[r] + std::log(l[r]);
  }
}

// For query t against the `visible` keys of the tile at s0 (its k and v transposed in x):
// scores ← P, dp ← dS · scale.
void tile_gradients(const Head& head, int t, int visible, float scale, const float* dout, const float* out,
                    const float* lse, Scratch& x) {
  const float* dy = dout + head.row(t);
  const float d_row = dot(dy, out + head.row(t), head.hs), row_lse = lse[head.stat(t)];
  row_times_tile(head.q(t), x.kt, head.hs, visible, x.scores.data());
  row_times_tile(dy, x.vt, head.hs, visible, x.dp.data());
  for (int c = 0; c < visible; ++c) {
    const float p = vexp(x.scores[c] * scale - row_lse);
    x.scores[c] = p;
    x.dp[c] = p * (x.dp[c] - d_row) * scale;
  }
}

// dk and dv of one key tile: the sums over the queries at and after each key; with `dq_too`
// (one thread owns the whole head), dq of those queries summed here as well, the key tiles in
// order — the same sums, in the same order, as query_tile_gradients makes.
void key_tile_gradients(const Head& head, int s0, float scale, const float* dout, const float* out, const float* lse,
                        float* dqkv, Scratch& x, std::vector<float>& dk, std::vector<float>& dv, bool dq_too) {
  const int cols = std::min(kTile, head.T - s0), hs = head.hs;
  std::fill(dk.begin(), dk.end(), 0.0f);
  std::fill(dv.begin(), dv.end(), 0.0f);
  transpose_tile(head, s0, cols, head.C, x.kt);
  transpose_tile(head, s0, cols, 2 * head.C, x.vt);
  for (int t = s0; t < head.T; ++t) {
    const int visible = std::min(cols, t - s0 + 1);
    tile_gradients(head, t, visible, scale, dout, out, lse, x);
    const float* dy = dout + head.row(t);
    for (int c = 0; c < visible; ++c) {
      add_scaled(dv.data() + static_cast<size_t>(c) * hs, x.scores[c], dy, hs);
      add_scaled(dk.data() + static_cast<size_t>(c) * hs, x.dp[c], head.q(t), hs);
    }
    if (!dq_too) continue;
    float* dq = dqkv + (static_cast<size_t>(head.b) * head.T + t) * 3 * head.C + head.h * hs;
    for (int c = 0; c < visible; ++c) add_scaled(dq, x.dp[c], head.k(s0 + c), hs);
  }
  for (int c = 0; c < cols; ++c) {
    float* row = dqkv + (static_cast<size_t>(head.b) * head.T + s0 + c) * 3 * head.C + head.h * hs;
    std::copy(dk.begin() + static_cast<ptrdiff_t>(c) * hs, dk.begin() + static_cast<ptrdiff_t>(c + 1) * hs, row + head.C);
    std::copy(dv.begin() + static_cast<ptrdiff_t>(c) * hs, dv.begin() + static_cast<ptrdiff_t>(c + 1) * hs,
              row + 2 * head.C);
  }
}

// dq rows of a head = 0, before key tiles add into them.
void clear_dq(const Head& head, float* dqkv) {
  for (int t = 0; t < head.T; ++t) {
    float* dq = dqkv + (static_cast<size_t>(head.b) * head.T + t) * 3 * head.C + head.h * head.hs;
    std::fill(dq, dq + head.hs, 0.0f);
  }
}

// dq of one query tile: the sums over the keys up to each query, tile by tile.
void query_tile_gradients(const Head& head, int t0, float scale, const float* dout, const float* out, const float* lse,
                          float* dqkv, Scratch& x) {
  const int rows = std::min(kTile, head.T - t0), hs = head.hs;
  for (int r = 0; r < rows; ++r) {
    float* dq = dqkv + (static_cast<size_t>(head.b) * head.T + t0 + r) * 3 * head.C + head.h * hs;
    std::fill(dq, dq + hs, 0.0f);
  }
  for (int s0 = 0; s0 <= t0; s0 += kTile) {
    const int cols = std::min(kTile, head.T - s0);
    transpose_tile(head, s0, cols, head.C, x.kt);
    transpose_tile(head, s0, cols, 2 * head.C, x.vt);
    for (int r = 0; r < rows; ++r) {
      const int t = t0 + r, visible = std::min(cols, t - s0 + 1);
      tile_gradients(head, t, visible, scale, dout, out, lse, x);
      float* dq = dqkv + (static_cast<size_t>(head.b) * head.T + t) * 3 * head.C + head.h * hs;
      for (int c = 0; c < visible; ++c) add_scaled(dq, x.dp[c], head.k(s0 + c), hs);
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
    std::vector<float> acc(static_cast<size_t>(kTile) * hs), m(kTile), l(kTile);
#pragma omp for collapse(3) schedule(dynamic)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < tiles; ++i)
          forward_tile(Head{qkv, T, C, hs, b, h}, i * kTile, scale, out, lse, x, acc, m, l);
  }
}

void flash_attention_backward(Context& ctx, float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, int B, int T, int C, int NH) {
  const int hs = C / NH, tiles = (T + kTile - 1) / kTile;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // Heads enough for every thread: one pass, each head's key tiles in order on one thread, dq
  // summed as they go. Else two, so that the tiles of a head spread over the threads: key tiles
  // (dk, dv), then query tiles (dq), the probabilities recomputed in each. The same bits.
  const bool one_pass = int64_t(B) * NH >= omp_get_max_threads();
#pragma omp parallel
  {
    Scratch x(hs);
    std::vector<float> dk(static_cast<size_t>(kTile) * hs), dv(static_cast<size_t>(kTile) * hs);
    if (one_pass) {
#pragma omp for collapse(2) schedule(dynamic)
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h) {
          const Head head{qkv, T, C, hs, b, h};
          clear_dq(head, dqkv);
          for (int j = 0; j < tiles; ++j) key_tile_gradients(head, j * kTile, scale, dout, out, lse, dqkv, x, dk, dv, true);
        }
    } else {
#pragma omp for collapse(3) schedule(dynamic)
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
          for (int j = 0; j < tiles; ++j)
            key_tile_gradients(Head{qkv, T, C, hs, b, h}, j * kTile, scale, dout, out, lse, dqkv, x, dk, dv, false);
#pragma omp for collapse(3) schedule(dynamic)
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
          for (int i = 0; i < tiles; ++i)
            query_tile_gradients(Head{qkv, T, C, hs, b, h}, i * kTile, scale, dout, out, lse, dqkv, x);
    }
  }
}

}  // namespace trident::kernels::cpu
