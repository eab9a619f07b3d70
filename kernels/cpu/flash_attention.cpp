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
// in two passes, so that every output row has one writer and no thread waits for another: over
// key tiles (dk, dv, each summing over the query tiles at and after it), then over query tiles
// (dq, summing over the key tiles up to it). Each pass recomputes P: the price of not storing it.
//
// Every sum runs in a fixed order (the tiles, then the rows or columns within them), whatever
// the thread count: the same bits with 1 thread or 64.
#include <algorithm>
#include <cmath>
#include <vector>

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
#pragma omp simd reduction(+ : sum)
  for (int d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

void add_scaled(float* into, float factor, const float* x, int n) {
#pragma omp simd
  for (int d = 0; d < n; ++d) into[d] += factor * x[d];
}

// The probability of key s for query t, recomputed from the row's log-sum-exp.
float probability(const Head& head, int t, int s, float scale, float lse) {
  return vexp(dot(head.q(t), head.k(s), head.hs) * scale - lse);
}

// dS of (t, s): P ⊙ (dP − D), with dP = dy_t · v_s and D = dy_t · y_t.
float score_gradient(const Head& head, const float* dy, int t, int s, float p, float d_row) {
  return p * (dot(dy, head.v(s), head.hs) - d_row);
}

// One query tile's output rows and their log-sum-exps, over the key tiles up to the diagonal.
void forward_tile(const Head& head, int t0, float scale, float* out, float* lse, std::vector<float>& scores,
                  std::vector<float>& acc, std::vector<float>& m, std::vector<float>& l) {
  const int rows = std::min(kTile, head.T - t0), hs = head.hs;
  std::fill(acc.begin(), acc.end(), 0.0f);
  std::fill(m.begin(), m.end(), -INFINITY);
  std::fill(l.begin(), l.end(), 0.0f);
  for (int s0 = 0; s0 <= t0; s0 += kTile) {
    const int cols = std::min(kTile, head.T - s0);
    for (int r = 0; r < rows; ++r) {
      const int t = t0 + r, visible = std::min(cols, t - s0 + 1);  // keys s0 .. t of this tile
      float* s = scores.data() + static_cast<size_t>(r) * kTile;
      float row_max = m[r];
      for (int c = 0; c < visible; ++c) {
        s[c] = dot(head.q(t), head.k(s0 + c), hs) * scale;
        row_max = std::max(row_max, s[c]);
      }
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

// dk and dv of one key tile: the sums over the queries at and after each key.
void key_tile_gradients(const Head& head, int s0, float scale, const float* dout, const float* out, const float* lse,
                        float* dqkv, std::vector<float>& dk, std::vector<float>& dv) {
  const int cols = std::min(kTile, head.T - s0), hs = head.hs;
  std::fill(dk.begin(), dk.end(), 0.0f);
  std::fill(dv.begin(), dv.end(), 0.0f);
  for (int t = s0; t < head.T; ++t) {
    const float* dy = dout + head.row(t);
    const float d_row = dot(dy, out + head.row(t), hs), row_lse = lse[head.stat(t)];
    const int visible = std::min(cols, t - s0 + 1);
    for (int c = 0; c < visible; ++c) {
      const int s = s0 + c;
      const float p = probability(head, t, s, scale, row_lse);
      add_scaled(dv.data() + static_cast<size_t>(c) * hs, p, dy, hs);
      add_scaled(dk.data() + static_cast<size_t>(c) * hs, score_gradient(head, dy, t, s, p, d_row) * scale, head.q(t), hs);
    }
  }
  for (int c = 0; c < cols; ++c) {
    float* row = dqkv + (static_cast<size_t>(head.b) * head.T + s0 + c) * 3 * head.C + head.h * hs;
    std::copy(dk.begin() + static_cast<ptrdiff_t>(c) * hs, dk.begin() + static_cast<ptrdiff_t>(c + 1) * hs, row + head.C);
    std::copy(dv.begin() + static_cast<ptrdiff_t>(c) * hs, dv.begin() + static_cast<ptrdiff_t>(c + 1) * hs,
              row + 2 * head.C);
  }
}

// dq of one query tile: the sums over the keys up to each query.
void query_tile_gradients(const Head& head, int t0, float scale, const float* dout, const float* out, const float* lse,
                          float* dqkv) {
  const int rows = std::min(kTile, head.T - t0), hs = head.hs;
  for (int r = 0; r < rows; ++r) {
    const int t = t0 + r;
    const float* dy = dout + head.row(t);
    const float d_row = dot(dy, out + head.row(t), hs), row_lse = lse[head.stat(t)];
    float* dq = dqkv + (static_cast<size_t>(head.b) * head.T + t) * 3 * head.C + head.h * hs;
    std::fill(dq, dq + hs, 0.0f);
    for (int s = 0; s <= t; ++s) {
      const float p = probability(head, t, s, scale, row_lse);
      add_scaled(dq, score_gradient(head, dy, t, s, p, d_row) * scale, head.k(s), hs);
    }
  }
}

}  // namespace

void flash_attention_forward(Context& ctx, float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH, tiles = (T + kTile - 1) / kTile;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(kTile) * kTile), acc(static_cast<size_t>(kTile) * hs), m(kTile), l(kTile);
#pragma omp for collapse(3) schedule(dynamic)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < tiles; ++i)
          forward_tile(Head{qkv, T, C, hs, b, h}, i * kTile, scale, out, lse, scores, acc, m, l);
  }
}

void flash_attention_backward(Context& ctx, float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, int B, int T, int C, int NH) {
  const int hs = C / NH, tiles = (T + kTile - 1) / kTile;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> dk(static_cast<size_t>(kTile) * hs), dv(static_cast<size_t>(kTile) * hs);
#pragma omp for collapse(3) schedule(dynamic)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int j = 0; j < tiles; ++j)
          key_tile_gradients(Head{qkv, T, C, hs, b, h}, j * kTile, scale, dout, out, lse, dqkv, dk, dv);
#pragma omp for collapse(3) schedule(dynamic)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < tiles; ++i)
          query_tile_gradients(Head{qkv, T, C, hs, b, h}, i * kTile, scale, dout, out, lse, dqkv);
  }
}

}  // namespace trident::kernels::cpu
