// The GEMM machinery the CPU kernels share (matmul.cpp, attention.cpp): a GEMM described by its
// shape, layout and operand type, created once through the primitive cache and then run; and
// the workspace that 16-bit operands are widened into when they are multiplied in f32.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {

// The type of a GEMM's a and b operands; c (and the bias) are always f32.
enum class OperandType { f32, bf16, f16 };

// c[b,h] (M, N) (= or +=) a[b,h] (M, K) · b[b,h] (K, N) (+ bias (N)), each operand with its
// strides (kernels.hpp's Strides).
struct Gemm {
  int batch = 1, heads = 1, M = 0, N = 0, K = 0;
  Strides a{}, b{}, c{};
  bool accumulate = false, bias = false;
  OperandType operands = OperandType::f32;
};

// "bf16 x bf16 -> f32 matmul, batch 1 x 1, M 64 N 192 K 64, strides a {..} b {..} c {..}, bias"
std::string describe(const Gemm& gemm);
// Runs the GEMM (its primitive created on first use and cached). An empty GEMM does nothing. A
// GEMM oneDNN refuses or fails throws std::runtime_error naming it and the CPU's ISA.
void run_gemm(const Gemm& gemm, float* c, const void* a, const void* b, const float* bias = nullptr);
// Creates and caches the GEMM's primitive without running it.
void prepare_gemm(const Gemm& gemm);

// The operands of ctx's GEMMs in this precision: f32 (fp32, or 16-bit values widened), or the
// 16-bit type itself (native).
OperandType operand_type(const Context& ctx, Precision precision);

// At least `floats` floats to widen 16-bit operands into: kept between calls (tracked as
// Workspace) and grown when a GEMM needs more, freed first so that its peak is the largest
// need — which the memory model (plan/memory_model.cpp) counts.
float* widening_workspace(size_t floats);

// GEMM primitives created so far in this process (kernels::gemm_primitives_created).
int64_t primitives_created();

// A dense (rows, cols) matrix, or one stored transposed, per batch entry.
Strides dense(int64_t rows, int64_t cols, bool stored_transposed);

}  // namespace trident::kernels::cpu
