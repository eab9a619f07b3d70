// The GEMM machinery the CPU kernels share (matmul.cpp, attention.cpp): a GEMM described by its
// shape, layout and operand type (kernels/common/gemm_shapes.hpp, shared with the CUDA
// backend), created once through the primitive cache and then run; the workspace that 16-bit
// operands are widened into when they are multiplied in f32, and the one that a 16-bit output's
// f32 sums wait in before they are rounded.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/common/gemm_shapes.hpp"
#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {

// Runs the GEMM: through oneDNN (its primitive created on first use and cached), or with
// ctx.arithmetic = portable our fixed-order loops (kernels/cpu/portable.hpp). An empty GEMM does
// nothing. A GEMM oneDNN refuses or fails throws std::runtime_error naming it and the CPU's ISA.
void run_gemm(const Context& ctx, const Gemm& gemm, float* c, const void* a, const void* b,
              const float* bias = nullptr);
// Creates and caches the GEMM's primitive without running it (portable: nothing to create).
void prepare_gemm(const Context& ctx, const Gemm& gemm);

// The operands of ctx's GEMMs in this precision: f32 (fp32, or 16-bit values widened), or the
// 16-bit type itself (native; portable, whose GEMM widens them as it reads them).
OperandType operand_type(const Context& ctx, Precision precision);

// At least `floats` floats to widen 16-bit operands into: kept between calls (tracked as
// Workspace) and grown when a GEMM needs more, freed first so that its peak is the largest
// need — which the memory model (plan/memory_model.cpp) counts.
float* widening_workspace(size_t floats);
// A (rows, cols) f32 scratch for the sums of a GEMM whose output is kept in 16 bits, before the
// pass that rounds them (linear_forward, linear_gelu_forward, linear_gelu_backward): kept and
// grown as widening_workspace is, and apart from it (a widened GEMM reads that one while it
// writes this). The memory model counts it too.
Tensor rounding_workspace(int64_t rows, int64_t cols);

// GEMM primitives created so far in this process (kernels::gemm_primitives_created).
int64_t primitives_created();

}  // namespace trident::kernels::cpu
