// The CPU kernels of kernels.arithmetic = portable: the GEMM, LayerNorm and GELU that the
// native path takes from oneDNN, written here so that every sum runs in one fixed order on any
// x86-64 or AArch64 CPU and at any vector width (the build does not contract a·b + c into FMAs, see the
// Makefile). oneDNN's kernels block and vectorize by the instruction set it finds, which changes
// the order of their sums and so their bits from one CPU to another; these do not, so a run in
// portable arithmetic gives the same bits on every machine for the same thread count (the
// per-element order does not even depend on it: work is split between threads by whole output
// elements). Slower than oneDNN; for reproducing a run elsewhere and for the reference check.
//
// Orders:
//   GEMM       c[m, n] = ((Σ_k a[m, k]·b[k, n], k = 0, 1, … in turn) + bias[n]) (+ c[m, n] before)
//              16-bit operands widened exactly to f32 first.
//   LayerNorm  mean = (Σ_c x_c in turn) / C; variance = (Σ_c (x_c − mean)² in turn) / C;
//              backward's row sums in turn, its dweight and dbias summed over rows in turn.
//   GELU       x · σ(2u) with u = √(2/π)(x + 0.044715 x³), σ(z) = 1/(1 + e^(−z)) by vexp
//              (kernels/common/math.hpp): no libm call whose result could differ by library.
#pragma once

#include <cstddef>

#include "kernels/common/gemm_shapes.hpp"

namespace trident::kernels::cpu {

// The GEMM as run_gemm describes it (kernels/cpu/matmul.hpp), operands of g.operands' type;
// run_gemm sends it only non-empty ones.
void portable_gemm(const Gemm& g, float* c, const void* a, const void* b, const float* bias);

// As kernels::layernorm_forward / layernorm_backward (kernels/ops.inc).
void portable_layernorm_forward(float* out, float* mean, float* variance, const float* inp, const float* weight,
                                const float* bias, int N, int C);
void portable_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* weight, const float* mean, const float* variance, int N, int C);

// As kernels::gelu_forward.
void portable_gelu_forward(float* out, const float* inp, size_t n);

}  // namespace trident::kernels::cpu
