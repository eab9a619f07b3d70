// The fixed-order CPU kernels of kernels.arithmetic = portable (kernels/cpu/portable.hpp states
// the orders). Each loop that sums runs its terms one after another; the compiler vectorizes
// only across independent outputs (the columns of a GEMM row block, the rows of LayerNorm), which
// changes no result.
#include "kernels/cpu/portable.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/common/elementwise.hpp"
#include "kernels/common/low16.hpp"
#include "kernels/common/math.hpp"
#include "kernels/common/rows.hpp"
#include "kernels/cpu/workspace.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels::cpu {
namespace {

constexpr int kColumns = 64;  // output columns a task owns: its accumulators fit in registers

// A thread's panel: the K rows of its task's kColumns columns of b.
int64_t thread_panel_floats(int64_t K) { return K * kColumns; }

// Element `offset` of an operand of `type`, widened to f32 (exact).
inline float load(const void* base, int64_t offset, OperandType type) {
  switch (type) {
    case OperandType::bf16: return bf16_widen(static_cast<const uint16_t*>(base)[offset]);
    case OperandType::f16: return fp16_widen(static_cast<const uint16_t*>(base)[offset]);
    default: return static_cast<const float*>(base)[offset];
  }
}

// b[k, n0 : n0 + width) of matrix (batch, head) for every k, widened, into panel (K, kColumns);
// the columns past width set to 0 (their sums are computed and never stored: no stale value, which could
// be a subnormal and slow the products, is read).
void pack_columns(float* panel, const Gemm& g, const void* b, int batch, int head, int n0, int width) {
  const int64_t base = batch * g.b.batch + head * g.b.head;
  for (int k = 0; k < g.K; ++k) {
    float* row = panel + static_cast<size_t>(k) * kColumns;
    for (int j = 0; j < width; ++j) row[j] = load(b, base + k * g.b.row + (n0 + j) * g.b.col, g.operands);
    for (int j = width; j < kColumns; ++j) row[j] = 0.0f;
  }
}

// c[m, n0 : n0 + width) of one matrix: per row, the columns' sums over k in turn.
void column_block(const Gemm& g, float* c, const void* a, const float* panel, const float* bias, int batch, int head,
                  int n0, int width) {
  const int64_t a_base = batch * g.a.batch + head * g.a.head, c_base = batch * g.c.batch + head * g.c.head;
  for (int m = 0; m < g.M; ++m) {
    float sums[kColumns] = {};
    for (int k = 0; k < g.K; ++k) {
      const float a_mk = load(a, a_base + m * g.a.row + k * g.a.col, g.operands);
      const float* row = panel + static_cast<size_t>(k) * kColumns;
      for (int j = 0; j < kColumns; ++j) sums[j] += a_mk * row[j];
    }
    for (int j = 0; j < width; ++j) {
      const float value = bias ? sums[j] + bias[n0 + j] : sums[j];
      float& out = c[c_base + m * g.c.row + (n0 + j) * g.c.col];
      out = g.accumulate ? out + value : value;
    }
  }
}

}  // namespace

// Each thread's panel is its part of a tracked workspace (kernels/cpu/workspace.hpp), but where
// the GEMM runs inside another kernel's parallel region (the flash attention's tile products,
// with more than one thread): there the region below is the calling thread's alone and its
// thread number names no part, so the panel is the call's own (K ≤ 128 there: the tile's).
void portable_gemm(const Gemm& g, float* c, const void* a, const void* b, const float* bias) {
  const int blocks = (g.N + kColumns - 1) / kColumns;
  const int64_t tasks = int64_t(g.batch) * g.heads * blocks;
  const size_t floats = static_cast<size_t>(thread_panel_floats(g.K));
  static Buffer<float> workspace;
  const bool nested = omp_in_parallel();
  const PerThread panels = nested ? PerThread{nullptr, 0} : per_thread(workspace, floats);
#pragma omp parallel
  {
    std::vector<float> own(nested ? floats : 0);
    float* panel = nested ? own.data() : panels.mine();
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int block = static_cast<int>(task % blocks);
      const int head = static_cast<int>(task / blocks % g.heads), batch = static_cast<int>(task / blocks / g.heads);
      const int n0 = block * kColumns, width = std::min(kColumns, g.N - n0);
      pack_columns(panel, g, b, batch, head, n0, width);
      column_block(g, c, a, panel, bias, batch, head, n0, width);
    }
  }
}

void portable_layernorm_forward(float* out, float* mean, float* variance, const float* inp, const float* weight,
                                const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float sum = 0.0f;
    for (int c = 0; c < C; ++c) sum += x[c];
    const float m = sum / C;
    float squares = 0.0f;
    for (int c = 0; c < C; ++c) squares += (x[c] - m) * (x[c] - m);
    const float var = squares / C, rstd = layernorm_rstd(var);
    float* y = out + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) y[c] = layernorm_value(x[c], m, rstd, weight[c], bias[c]);
    mean[n] = m;
    variance[n] = var;
  }
}

void portable_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* weight, const float* mean, const float* variance, int N, int C) {
  std::vector<float> rstds(static_cast<size_t>(N));
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const size_t row = static_cast<size_t>(n) * C;
    const float rstd = rstds[n] = layernorm_rstd(variance[n]);
    float dxhat_sum = 0.0f, dxhat_xhat_sum = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float dxhat = dout[row + c] * weight[c];
      dxhat_sum += dxhat;
      dxhat_xhat_sum += dxhat * ((inp[row + c] - mean[n]) * rstd);
    }
    const float mean_dxhat = dxhat_sum / C, mean_dxhat_xhat = dxhat_xhat_sum / C;
    for (int c = 0; c < C; ++c)
      dinp[row + c] += layernorm_input_gradient(dout[row + c], weight[c], (inp[row + c] - mean[n]) * rstd, rstd,
                                                mean_dxhat, mean_dxhat_xhat);
  }
  // The parameters' gradients: each column summed over the rows in turn, then added.
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    float dw = 0.0f, db = 0.0f;
    for (int n = 0; n < N; ++n) {
      const size_t at = static_cast<size_t>(n) * C + c;
      dw += dout[at] * ((inp[at] - mean[n]) * rstds[n]);
      db += dout[at];
    }
    dweight[c] += dw;
    dbias[c] += db;
  }
}

void portable_gelu_forward(float* out, const float* inp, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + 0.044715f * x * x * x);
    out[i] = x / (1.0f + vexp(-2.0f * u));
  }
}

}  // namespace trident::kernels::cpu

namespace trident::kernels {

int64_t cpu_portable_gemm_thread_floats(int64_t K) { return cpu::thread_panel_floats(K); }

}  // namespace trident::kernels
