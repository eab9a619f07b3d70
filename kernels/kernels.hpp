// One interface for the compute kernels of the model. The CPU implementation (kernels/cpu:
// oneDNN matmul + OpenMP) is what every test runs; a CUDA implementation (kernels/cuda:
// cuBLASLt + own kernels) sits behind the same declarations, which is why every pointer here
// is a device pointer of the Context's device and every call takes the Context.
//
// Conventions: row-major; shapes in comments as (rows, cols); "+=" outputs accumulate (grads
// accumulate over micro-batches), "=" outputs are overwritten. Results are deterministic: the
// same inputs and thread count give bitwise-identical outputs (no atomics, fixed reduction
// order).
#pragma once

#include <cstddef>
#include <cstdint>

namespace trident::kernels {

// Where and on what queue kernels run. device = -1: the host CPU (stream unused); device >= 0:
// a CUDA device, stream a cudaStream_t.
struct Context {
  int device = -1;
  void* stream = nullptr;
};

// ---- GEMM (oneDNN matmul on the CPU, primitives cached per shape) ----------------------------
// y (M, N) = x (M, K) · wᵀ + bias      w: (N, K) as stored by PyTorch/llm.c; bias (N) or null
void linear_forward(Context& ctx, float* y, const float* x, const float* w, const float* bias,
                    int M, int K, int N);
// dx (M, K) = dy (M, N) · w (N, K);  dw (N, K) += dyᵀ · x;  dbias (N) += Σ_m dy[m, :]
// (dx or dbias may be null to skip them). dx is overwritten: it is always a fresh activation
// gradient, while weight gradients accumulate over micro-batches.
void linear_backward(Context& ctx, float* dx, float* dw, float* dbias, const float* dy,
                     const float* x, const float* w, int M, int K, int N);
// Where the matrices of a (batch, heads) grid of matrices live, in elements: entry (row, col) of
// matrix (b, h) is at data[b·batch + h·head + row·row + col·col]. A transposed operand is the
// same memory with row and col swapped; attention reads heads straight out of the fused qkv
// activation this way, without copies.
struct Strides {
  int64_t batch, head, row, col;
};
// c[b,h] (M, N) (= or +=) a[b,h] (M, K) · b[b,h] (K, N), every operand with its own strides.
void strided_matmul(Context& ctx, float* c, const Strides& c_strides, const float* a,
                    const Strides& a_strides, const float* b, const Strides& b_strides, int batch,
                    int heads, int M, int N, int K, bool accumulate);
// Batched c[b] (M, N) (= or +=) op(a[b]) · op(b[b]), op = transpose when the flag is set;
// a[b] is stored (M, K) or, transposed, (K, M); b[b] stored (K, N) or, transposed, (N, K).
void batched_matmul(Context& ctx, float* c, const float* a, const float* b, int batch, int M,
                    int N, int K, bool transpose_a, bool transpose_b, bool accumulate);

// ---- Transformer pieces ----------------------------------------------------------------------
// out (N, C) = (inp − mean) / √(variance + 1e-5) · weight + bias (biased variance over C);
// saves mean and variance (N) for backward.
void layernorm_forward(Context& ctx, float* out, float* mean, float* variance, const float* inp,
                       const float* weight, const float* bias, int N, int C);
// dinp (N, C) +=, dweight (C) +=, dbias (C) +=
void layernorm_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* bias,
                        const float* mean, const float* variance, int N, int C);

// GELU, tanh approximation: out = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
void gelu_forward(Context& ctx, float* out, const float* inp, size_t n);
void gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, size_t n);  // =

void residual_forward(Context& ctx, float* out, const float* a, const float* b, size_t n);  // a+b
void add_inplace(Context& ctx, float* acc, const float* x, size_t n);                       // +=

// Causal multi-head self-attention. qkv (B, T, 3C) holds [q | k | v], heads contiguous slices
// of hs = C/NH; out (B, T, C). Saves the probabilities att (B, NH, T, T) (above-diagonal
// entries zero) for backward, which also reads qkv again.
void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T,
                       int C, int NH);
// dqkv (B, T, 3C) =; datt (B, NH, T, T) is scratch.
void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att, int B, int T, int C, int NH);

// out (B, T, C) = wte[tokens] + wpe[t]
void encoder_forward(Context& ctx, float* out, const int32_t* tokens, const float* wte,
                     const float* wpe, int B, int T, int C);
// dwte (Vp, C) +=, dwpe (maxT, C) +=
void encoder_backward(Context& ctx, float* dwte, float* dwpe, const float* dout,
                      const int32_t* tokens, int B, int T, int C);

// Softmax cross-entropy over the first V of Vp logits per row (padded columns ignored).
// losses (N) = -log softmax(logits[n, :V])[targets[n]]; saves log_normalizers (N) =
// log Σ_v exp(logits[n, v]) for backward.
void crossentropy_forward(Context& ctx, float* losses, float* log_normalizers,
                          const float* logits, const int32_t* targets, int N, int V, int Vp);
// dlogits (N, Vp) = (softmax - onehot) · scale, padded columns 0. dlogits may alias logits.
void crossentropy_backward(Context& ctx, float* dlogits, const float* logits,
                           const float* log_normalizers, const int32_t* targets, float scale,
                           int N, int V, int Vp);

// ---- Optimizer -------------------------------------------------------------------------------
// AdamW (decoupled weight decay) step t >= 1 on n parameters; m, v are the moments. The
// gradients are used multiplied by grad_scale (gradient clipping folded in: one pass less).
void adamw_update(Context& ctx, float* params, const float* grads, float* m, float* v, size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale);
// Σ x², accumulated in double in fixed-size chunks summed in order: independent of threads.
double sum_of_squares(Context& ctx, const float* x, size_t n);

}  // namespace trident::kernels
