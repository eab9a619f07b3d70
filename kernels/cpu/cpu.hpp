// The CPU backend's kernels, in namespace kernels::cpu: every operation of kernels/ops.inc
// (oneDNN + OpenMP), and what its operations on tensors are built from — the kernels on pointers
// that kernels/common/unwrap.inc calls, the linear layer on f32 or 16-bit pointers and the 16-bit
// conversions of its mixed-precision emulation (the model reaches them only through the
// operations on tensors).
#pragma once

#include "kernels/kernels.hpp"

namespace trident::kernels::cpu {

#include "kernels/ops.inc"

// ---- The kernels on pointers (kernels/cpu/*.cpp) ----------------------------------------------
#include "kernels/common/pointer_kernels.inc"

// ---- The linear layer on pointers: f32, and 16-bit operands of a precision (what the typed
// linear_forward / linear_backward of ops.inc call) -------------------------------------------
// y (M, N) = x (M, K) · wᵀ + bias      w: (N, K) as stored by PyTorch/llm.c; bias (N) or null
void linear_forward(Context& ctx, float* y, const float* x, const float* w, const float* bias,
                    int M, int K, int N);
// dx (M, K) = dy (M, N) · w (N, K);  dw (N, K) += dyᵀ · x;  dbias (N) += Σ_m dy[m, :]
// (dx or dbias may be null to skip them). dx is overwritten: it is always a fresh activation
// gradient, while weight gradients accumulate over micro-batches.
void linear_backward(Context& ctx, float* dx, float* dw, float* dbias, const float* dy,
                     const float* x, const float* w, int M, int K, int N);
// linear_forward / linear_backward on 16-bit operands, f32 results and accumulation (dw and
// dbias are the f32 gradients), by ctx.low16_gemm: oneDNN's 16-bit matmul, or the operands
// widened (exactly) into a workspace and multiplied in f32 — always for fp16, for which
// oneDNN 2.6 has no CPU matmul.
// y (M, N) = x (M, K) · wᵀ + bias
void linear_forward_low(Context& ctx, Precision precision, float* y, const low16* x,
                        const low16* w, const float* bias, int M, int K, int N);
// dx (M, K) = dy · w;  dw (N, K) += dyᵀ · x;  dbias (N) += Σ_m dy (from the f32 dy).
// dy_low (M, N) is dy in the 16-bit type (the GEMMs' operand). Null dx, dw or dbias: skipped;
// x is read for dw alone (may be null without it).
void linear_backward_low(Context& ctx, Precision precision, float* dx, float* dw, float* dbias,
                         const float* dy, const low16* dy_low, const low16* x, const low16* w,
                         int M, int K, int N);

// ---- 16-bit conversions on host pointers ------------------------------------------------------
// out (n) = in rounded to bf16, to nearest even; NaN stays NaN (quiet), ±Inf stays ±Inf.
void to_bf16(Context& ctx, bf16* out, const float* in, size_t n);
// out (n) = in widened to f32 (exact).
void from_bf16(Context& ctx, float* out, const bf16* in, size_t n);
// The same for fp16 (IEEE rounding to nearest even: overflow beyond 65504 gives ±Inf,
// subnormals kept), and for either type by precision (not fp32).
void to_fp16(Context& ctx, low16* out, const float* in, size_t n);
void from_fp16(Context& ctx, float* out, const low16* in, size_t n);
void to_low(Context& ctx, Precision precision, low16* out, const float* in, size_t n);
void from_low(Context& ctx, Precision precision, float* out, const low16* in, size_t n);
// Storing an activation in 16 bits: kept (n) = values rounded, and values (n) = kept widened,
// so that what the f32 kernels read next is exactly what is stored. One pass.
void store_low(Context& ctx, Precision precision, low16* kept, float* values, size_t n);
// The norms' backward's 16-bit input (n values) widened into a workspace (kernels/cpu/layernorm.cpp;
// tracked, kernels/cpu/workspace.hpp), valid until the next call.
const float* widened_input(Context& ctx, Precision precision, const low16* inp, size_t n);
// The n f32 values rounded to the 16-bit type into the first 2n bytes of their own memory (the
// f32 values are gone): a 16-bit copy that needs no second buffer. Returns it.
low16* narrow_in_place(Context& ctx, Precision precision, float* values, size_t n);
// values (n) = values rounded to the 16-bit type (and widened back): kept in f32 as 16-bit values.
void round_low(Context& ctx, Precision precision, float* values, size_t n);

}  // namespace trident::kernels::cpu
