// The GEMMs the model runs, described once for both backends: a GEMM as shape, strides and
// operand type (the CPU runs it through oneDNN's matmul, CUDA through cuBLASLt), the three
// GEMMs of the linear layer and the six of the attention core over the (B, NH) grid of heads
// read in place out of the fused qkv activation. Host code only.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/kernels.hpp"

namespace trident::kernels {

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

inline const char* operand_type_name(OperandType type) {
  return type == OperandType::bf16 ? "bf16" : type == OperandType::f16 ? "f16" : "f32";
}

// Bytes of one operand element.
inline size_t operand_bytes(OperandType type) { return type == OperandType::f32 ? 4 : 2; }

// "bf16 x bf16 -> f32 matmul, batch 1 x 1, M 64 N 192 K 64, strides a {..} b {..} c {..}, bias"
inline std::string describe(const Gemm& g) {
  auto strides = [](const Strides& s) {
    return "{" + std::to_string(s.batch) + "," + std::to_string(s.head) + "," + std::to_string(s.row) + "," +
           std::to_string(s.col) + "}";
  };
  const std::string t = operand_type_name(g.operands);
  return t + " x " + t + " -> f32 matmul, batch " + std::to_string(g.batch) + " x " + std::to_string(g.heads) +
         ", M " + std::to_string(g.M) + " N " + std::to_string(g.N) + " K " + std::to_string(g.K) + ", strides a " +
         strides(g.a) + " b " + strides(g.b) + " c " + strides(g.c) + (g.accumulate ? ", accumulating" : "") +
         (g.bias ? ", with bias" : "");
}

// A dense (rows, cols) matrix, or one stored transposed, per batch entry.
inline Strides dense(int64_t rows, int64_t cols, bool stored_transposed) {
  return stored_transposed ? Strides{rows * cols, rows * cols, 1, rows} : Strides{rows * cols, rows * cols, cols, 1};
}

// ---- The linear layer ----------------------------------------------------------------------------
// Forward: y (M, N) = x (M, K) · wᵀ (+ bias), wᵀ read from w stored (N, K) as the transposed (K, N)
// operand.
inline Gemm linear_forward_gemm(int M, int K, int N, bool bias, OperandType type) {
  return {1, 1, M, N, K, dense(M, K, false), dense(K, N, true), dense(M, N, false), false, bias, type};
}
// dx (M, K) = dy (M, N) · w (N, K)
inline Gemm linear_input_gradient_gemm(int M, int K, int N, OperandType type) {
  return {1, 1, M, K, N, dense(M, N, false), dense(N, K, false), dense(M, K, false), false, false, type};
}
// dw (N, K) += dyᵀ · x: dyᵀ (N, M) read from dy stored (M, N)
inline Gemm linear_weight_gradient_gemm(int M, int K, int N, OperandType type) {
  return {1, 1, N, K, M, dense(N, M, true), dense(M, K, false), dense(N, K, false), true, false, type};
}

// ---- Attention -----------------------------------------------------------------------------------
// The (batch, head) views attention works on, as strides into the activations.
struct AttentionViews {
  Strides head;              // a head's (T, hs) slice of q, k or v inside qkv (B, T, 3C)
  Strides head_transposed;   // the same slice read as (hs, T)
  Strides out_head;          // a head's (T, hs) slice of out or dout (B, T, C)
  Strides probs;             // att (B, NH, T, T), dense
  Strides probs_transposed;  // att read as Pᵀ
};

inline AttentionViews attention_views(int64_t T, int64_t C, int64_t NH) {
  const int64_t hs = C / NH;
  return {{T * 3 * C, hs, 3 * C, 1},
          {T * 3 * C, hs, 1, 3 * C},
          {T * C, hs, C, 1},
          {NH * T * T, T * T, T, 1},
          {NH * T * T, T * T, 1, T}};
}

// The six products of the attention core over the (B, NH) grid, on operands of one type.
struct AttentionGemms {
  Gemm scores;    // S = q kᵀ     (T, T) = (T, hs) · (hs, T)
  Gemm values;    // y = P v      (T, hs) = (T, T) · (T, hs)
  Gemm dprobs;    // dP = dy vᵀ
  Gemm dvalues;   // dv = Pᵀ dy
  Gemm dqueries;  // dq = dS k
  Gemm dkeys;     // dk = dSᵀ q
};

inline AttentionGemms attention_gemms(int B, int T, int C, int NH, OperandType type) {
  const int hs = C / NH;
  const AttentionViews v = attention_views(T, C, NH);
  auto gemm = [&](int M, int N, int K, const Strides& a, const Strides& b, const Strides& c) {
    return Gemm{B, NH, M, N, K, a, b, c, false, false, type};
  };
  return {gemm(T, T, hs, v.head, v.head_transposed, v.probs),
          gemm(T, hs, T, v.probs, v.head, v.out_head),
          gemm(T, T, hs, v.out_head, v.head_transposed, v.probs),
          gemm(T, hs, T, v.probs_transposed, v.out_head, v.head),
          gemm(T, hs, T, v.probs, v.head, v.head),
          gemm(T, hs, T, v.probs_transposed, v.head, v.head)};
}

// 1/√hs, the scale of the attention scores.
inline float attention_scale(int C, int NH) { return 1.0f / std::sqrt(static_cast<float>(C / NH)); }

}  // namespace trident::kernels
