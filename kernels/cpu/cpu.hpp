// The CPU backend's kernels, in namespace kernels::cpu: every operation of kernels/ops.inc
// (oneDNN + OpenMP), and the 16-bit conversions on raw pointers that its mixed-precision
// emulation is built from (the model reaches them only through the typed operations: convert,
// store, round_to, narrow).
#pragma once

#include "kernels/kernels.hpp"

namespace trident::kernels::cpu {

#include "kernels/ops.inc"

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
// The n f32 values rounded to the 16-bit type into the first 2n bytes of their own memory (the
// f32 values are gone): a 16-bit copy that needs no second buffer. Returns it.
low16* narrow_in_place(Context& ctx, Precision precision, float* values, size_t n);
// values (n) = values rounded to the 16-bit type (and widened back): kept in f32 as 16-bit values.
void round_low(Context& ctx, Precision precision, float* values, size_t n);

}  // namespace trident::kernels::cpu
