// The CUDA backend's kernels, in namespace kernels::cuda: every operation of kernels/ops.inc
// (cuBLASLt GEMMs + our kernels, each enqueued on the Context's stream), the kernels on pointers
// its operations on tensors unwrap into, and what the files of kernels/cuda share: the stream of
// a Context, error checks, launch sizes, the GEMM runner and the 16-bit conversions on device
// pointers. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/gemm_shapes.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels::cuda {

#include "kernels/ops.inc"

// ---- The kernels on pointers (kernels/cuda/*.cu), which kernels/common/unwrap.inc calls ---------
#include "kernels/common/pointer_kernels.inc"

// The backend's stream of a Context (null: the legacy default stream).
inline cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.stream.handle); }

// Throws std::runtime_error "what: CUDA's message" when status is not cudaSuccess.
void check(cudaError_t status, const char* what);
// After a kernel launch: the launch's own error (bad configuration), named.
void check_launch(const char* kernel);

// Blocks of `threads` covering n items: at least one, at most 2^20 (about 1M) — the element-wise
// kernels loop grid-stride over what one grid does not cover; the column kernels' widths (a few
// thousand columns) stay far below the cap.
constexpr int kThreads = 256;
inline unsigned blocks_for(size_t n, int threads = kThreads) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks > 65535u * 16 ? 65535u * 16 : blocks));
}

// ---- GEMMs (matmul.cu) -------------------------------------------------------------------------
// The GEMMs themselves are described in kernels/common/gemm_shapes.hpp (shared with the CPU):
// here each operand must have a unit row or column stride; products are summed in f32
// (CUBLAS_COMPUTE_32F: no TF32 for f32 operands), c is f32.
// Runs the GEMM on ctx's stream through cuBLASLt (its descriptors, layouts and algorithm created
// on first use and cached per shape). An empty GEMM does nothing.
void run_gemm(Context& ctx, const Gemm& gemm, float* c, const void* a, const void* b, const float* bias = nullptr);
// Creates and caches the GEMM's plan without running it (throws when cuBLASLt has no algorithm).
void prepare_gemm(const Gemm& gemm);

// ---- Column sums (column_sums.cu): bias and LayerNorm parameter gradients ------------------------
// Sums over many rows in two deterministic passes: each chunk of kColumnChunk rows summed in row
// order by one thread per (chunk, column), then the chunks' sums in chunk order — enough threads
// to fill the GPU where one thread per column would loop over every row, and no atomics.
constexpr int kColumnChunk = 64;
inline int column_chunks(int rows) { return (rows + kColumnChunk - 1) / kColumnChunk; }
// out[c] += Σ_r x[r, c] for x (rows, cols).
void column_sums_add(Context& ctx, float* out, const float* x, int rows, int cols);
// The same over x's 16-bit values of `precision`, widened as they are read.
void column_sums_add_low16(Context& ctx, Precision precision, float* out, const low16* x, int rows, int cols);
// out[c] += Σ_chunk partial[chunk, c] for partial (chunks, cols), chunks in order.
void add_chunk_sums(Context& ctx, float* out, const float* partial, int chunks, int cols);
// Stream-ordered scratch of n floats (cudaMallocAsync), and its release on the same stream.
float* stream_scratch(Context& ctx, size_t n, const char* what);
void release_scratch(Context& ctx, float* scratch);
// The most shared memory a block may ask for on this process's device (a process drives one
// device: a rank's), cudaDevAttrMaxSharedMemoryPerBlockOptin (memory.cu).
size_t shared_memory_limit();

// ---- 16-bit conversions on device pointers (low16.cu) ------------------------------------------
void to_low(Context& ctx, Precision precision, low16* out, const float* in, size_t n);
void from_low(Context& ctx, Precision precision, float* out, const low16* in, size_t n);
void store_low(Context& ctx, Precision precision, low16* kept, float* values, size_t n);
void round_low(Context& ctx, Precision precision, float* values, size_t n);
low16* narrow_in_place(Context& ctx, Precision precision, float* values, size_t n);

// ---- The GELU layer's unfused ending (elementwise.cu) --------------------------------------------
// pre = sums rounded to `precision`'s 16-bit type, act = GELU(pre's values) rounded: what
// linear_gelu_forward writes where cuBLASLt's epilogue does not take the GEMM.
void keep_with_gelu(Context& ctx, Precision precision, low16* pre, low16* act, const float* sums, size_t n);

// ---- cuDNN's fused attention (cudnn_attention.cpp) -----------------------------------------------
// The whole causal sequence of a 16-bit model's attention: NH query heads and KV key/value heads
// (grouped-query attention; KV = NH multi-head) of hs channels in the (B, T, (NH + 2·KV)·hs) rows
// of qkv, all of the 16-bit type `values`; scores scaled by `scale`.
struct FusedAttention {
  const void* qkv;
  int B, T, NH, KV, hs;
  Precision values;
  float scale;
};
// Whether cuDNN's fused attention takes it: ctx.library_attention, a build with cuDNN, values of
// ctx's operand type, and cuDNN's graphs for these sizes built — on the first call for them, and
// which kernels run them said once on stderr (a refusal: ours from then on).
bool cudnn_attention_takes(Context& ctx, const FusedAttention& a);
// out (B, T, C) of the 16-bit type =, lse (B, NH, T) = each query's log-sum-exp of its scaled
// scores (natural log: our kernels' lse). false, and nothing done, where a pointer is not 16-byte
// aligned (cuDNN's kernels need it; the caller runs ours), as for backward:
bool cudnn_attention_forward(Context& ctx, const FusedAttention& a, void* out, float* lse);
// dqkv (B, T, (NH + 2·KV)·hs) f32 = and dqkv_low (its 16-bit copy; null: a scratch) =, from the f32 dout and
// what forward kept.
bool cudnn_attention_backward(Context& ctx, const FusedAttention& a, float* dqkv, low16* dqkv_low, const float* dout,
                              const void* out, const float* lse);
// The forward and backward graphs of `a` checked by cudnn-frontend's validation for GPUs of
// compute capability sm_version (90: Hopper), without a device: "" where they pass, else why not.
std::string cudnn_attention_graph_check(const FusedAttention& a, int sm_version);
// Whether this build has cuDNN's fused attention (make CUDNN=1, where its frontend's headers were
// fetched); cudnn_attention_takes then still asks the library.
bool cudnn_attention_built_in();
// "cuDNN V's fused attention (cudnn-frontend F), ...", or that this build has none: `trident version`.
std::string cudnn_attention_build();

}  // namespace trident::kernels::cuda
