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
#include <string>

namespace trident::kernels {

// How the GEMMs on 16-bit operands (optim.precision = bf16 | fp16) run on the CPU, the deck's
// kernels.low16_gemm: native = oneDNN's matmul on the 16-bit type; widened = the operands
// widened (exactly) to f32 in a tracked workspace and multiplied in f32 — the same products (a
// product of two 16-bit values is exact in f32), summed in f32, so the results agree to f32
// rounding; automatic = native where oneDNN creates that matmul on this CPU, else widened.
enum class Low16Gemm { automatic, native, widened };

// Where and on what queue kernels run. device = -1: the host CPU (stream unused); device >= 0:
// a CUDA device, stream a cudaStream_t. low16_gemm: the path of the 16-bit GEMMs; automatic
// follows the process's path (set_default_low16_gemm), which a job sets once at start-up from
// kernels.low16_gemm agreed over all ranks (tests force native or widened per context).
struct Context {
  int device = -1;
  void* stream = nullptr;
  Low16Gemm low16_gemm = Low16Gemm::automatic;
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

// ---- 16-bit storage (mixed precision: optim.precision = bf16 | fp16) -------------------------
// A bfloat16 value: the upper 16 bits of an IEEE float32.
using bf16 = uint16_t;
// A 16-bit value of the model's storage type: bf16 or IEEE binary16 (fp16), as Precision says.
using low16 = uint16_t;
enum class Precision { fp32, bf16, fp16 };
const char* precision_name(Precision precision);  // "fp32", "bf16", "fp16"
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
// batched_matmul with bf16 operands and an f32 result (= or +=): products of bf16 values,
// accumulated in f32 by oneDNN (AVX512-BF16 instructions where the CPU has them), or widened
// to f32 first, as ctx.low16_gemm says.
void batched_matmul_bf16(Context& ctx, float* c, const bf16* a, const bf16* b, int batch, int M,
                         int N, int K, bool transpose_a, bool transpose_b, bool accumulate);
// strided_matmul with bf16 operands and an f32 result.
void strided_matmul_bf16(Context& ctx, float* c, const Strides& c_strides, const bf16* a,
                         const Strides& a_strides, const bf16* b, const Strides& b_strides,
                         int batch, int heads, int M, int N, int K, bool accumulate);
// linear_forward / linear_backward on 16-bit operands, f32 results and accumulation (dw and
// dbias are the f32 gradients), by ctx.low16_gemm: oneDNN's 16-bit matmul, or the operands
// widened (exactly) into a workspace and multiplied in f32 — always for fp16, for which
// oneDNN 2.6 has no CPU matmul.
// y (M, N) = x (M, K) · wᵀ + bias
void linear_forward_low(Context& ctx, Precision precision, float* y, const low16* x,
                        const low16* w, const float* bias, int M, int K, int N);
// dx (M, K) = dy · w;  dw (N, K) += dyᵀ · x;  dbias (N) += Σ_m dy (from the f32 dy).
// dy_low (M, N) is dy in the 16-bit type (the GEMMs' operand).
void linear_backward_low(Context& ctx, Precision precision, float* dx, float* dw, float* dbias,
                         const float* dy, const low16* dy_low, const low16* x, const low16* w,
                         int M, int K, int N);

// ---- The 16-bit GEMM path and the GEMM plan ------------------------------------------------
// The CPU's instruction set as oneDNN uses it ("avx2", "avx512_core", "avx512_core_bf16",
// "avx512_core_amx", ...), capped by DNNL_MAX_CPU_ISA.
std::string cpu_isa();
// Whether oneDNN creates a matmul on operands of this 16-bit type on this CPU (asked once per
// type, by creating a small one; fp32: always).
bool native_low16_gemm_available(Precision precision);
// The path of the contexts that say automatic (initially automatic itself: native where
// available), and the path a context takes: its own, or the process's.
void set_default_low16_gemm(Low16Gemm path);
Low16Gemm effective_low16_gemm(const Context& ctx);
// Whether ctx's GEMMs in this precision widen their 16-bit operands (never for fp32).
bool widens_low16(const Context& ctx, Precision precision);
// One line on the path ctx's GEMMs take in this precision, e.g. "bf16 GEMM: native
// avx512_core_amx (oneDNN brg:avx512_core_bf16)", "bf16 GEMM: widened to f32 (no bf16 matmul on
// avx2)", "fp32 GEMM: avx512_core_amx".
std::string gemm_path_summary(const Context& ctx, Precision precision);
// Create (and cache) the GEMM primitives that linear_forward(_low) / linear_backward(_low) with
// these arguments (bias given or not) and the attention kernels of this precision will run,
// without running them: what the start of a job (and --check) does, so that a GEMM this CPU
// cannot run fails before the first step, naming its shape. A GEMM oneDNN refuses throws
// std::runtime_error naming the operation, the shapes, the types and the CPU's ISA.
void prepare_linear(Context& ctx, Precision precision, int M, int K, int N, bool bias);
void prepare_attention(Context& ctx, Precision precision, int B, int T, int C, int NH);
// GEMM primitives created so far in this process (the tests hold prepare_* to what runs).
int64_t gemm_primitives_created();

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
// out (M, N) = residual + (x + bias[n]): a row-parallel layer's bias, added after its
// all-reduce, fused with the residual connection.
void bias_residual_forward(Context& ctx, float* out, const float* residual, const float* x,
                           const float* bias, int M, int N);
void add_inplace(Context& ctx, float* acc, const float* x, size_t n);                       // +=

// Causal multi-head self-attention. qkv (B, T, 3C) holds [q | k | v], heads contiguous slices
// of hs = C/NH; out (B, T, C). Saves the probabilities att (B, NH, T, T) (above-diagonal
// entries zero) for backward, which also reads qkv again.
void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T,
                       int C, int NH);
// dqkv (B, T, 3C) =; datt (B, NH, T, T) is scratch.
void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att, int B, int T, int C, int NH);
// The same with bf16 products (f32 accumulation, softmax in f32; widened to f32 as
// ctx.low16_gemm says), for optim.precision = bf16:
// q, k, v read from qkv_low (B, T, 3C); the probabilities rounded to bf16 before P·V, kept in
// att_low (B, NH, T, T) and, as their f32 values, in att.
void attention_forward_bf16(Context& ctx, float* out, float* att, bf16* att_low,
                            const bf16* qkv_low, int B, int T, int C, int NH);
// dqkv (B, T, 3C) =. dout (B, T, C) f32 and dout_low, its bf16 scratch; att and att_low as
// forward left them; datt (B, NH, T, T) scratch (dS is narrowed to bf16 in place for dq, dk).
void attention_backward_bf16(Context& ctx, float* dqkv, float* datt, const float* dout,
                             bf16* dout_low, const bf16* qkv_low, const float* att,
                             const bf16* att_low, int B, int T, int C, int NH);

// Token embedding over a slice of the vocabulary (rows [vocab_begin, vocab_begin + rows) of wte,
// all of it without tensor parallelism): out (B, T, C) = wte[token − vocab_begin] for tokens in
// the slice, 0 for the others (another rank of the tensor group holds their rows).
void embedding_forward(Context& ctx, float* out, const int32_t* tokens, const float* wte,
                       int vocab_begin, int rows, int B, int T, int C);
// dwte (rows, C) += dout at the tokens in the slice
void embedding_backward(Context& ctx, float* dwte, const float* dout, const int32_t* tokens,
                        int vocab_begin, int rows, int B, int T, int C);
// out (B, T, C) += wpe[t];  dwpe (T, C) += Σ_b dout[b, t]
void positions_forward(Context& ctx, float* out, const float* wpe, int B, int T, int C);
void positions_backward(Context& ctx, float* dwpe, const float* dout, int B, int T, int C);

// Softmax cross-entropy, in pieces so that the vocabulary can be split over a tensor group
// (the caller combines the partial results over the group between the pieces). Each rank holds
// logits (N, ld) for the vocabulary columns [vocab_begin, vocab_begin + ld), of which the first
// `valid` are real tokens (the rest, padding beyond V, never enter the softmax).
// maxes (N) = max over the valid columns (−inf if none)
void crossentropy_row_max(Context& ctx, float* maxes, const float* logits, int N, int valid, int ld);
// sums (N) = Σ_valid exp(logit − maxes); target_logits (N) = the target's logit where the
// target is a column of this slice, else 0
void crossentropy_row_sums(Context& ctx, float* sums, float* target_logits, const float* logits,
                           const float* maxes, const int32_t* targets, int vocab_begin, int N,
                           int valid, int ld);
// With the combined maxes and sums: losses (N) = log sums + maxes − target_logits, and
// log_normalizers (N) = maxes + log sums, which backward needs.
void crossentropy_losses(Context& ctx, float* losses, float* log_normalizers, const float* maxes,
                         const float* sums, const float* target_logits, int N);
// dlogits (N, ld) = (softmax − onehot) · scale over the valid columns, 0 on the padding.
// dlogits may alias logits.
void crossentropy_backward(Context& ctx, float* dlogits, const float* logits,
                           const float* log_normalizers, const int32_t* targets, int vocab_begin,
                           float scale, int N, int valid, int ld);

// ---- Optimizer -------------------------------------------------------------------------------
// AdamW (decoupled weight decay) step t >= 1 on n parameters; m, v are the moments. The
// gradients are used multiplied by grad_scale (gradient clipping folded in: one pass less).
void adamw_update(Context& ctx, float* params, const float* grads, float* m, float* v, size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t,
                  float grad_scale);
// Σ x², accumulated in double in fixed-size chunks summed in order: independent of threads.
double sum_of_squares(Context& ctx, const float* x, size_t n);

}  // namespace trident::kernels
