// One interface for the compute kernels of the model and every operation on its buffers. The
// operations (kernels/ops.inc) are declared here, in trident::kernels, and each call goes to
// the kernel table of the Context's backend (kernels/backend.hpp): the CPU backend's
// (kernels/cpu, namespace kernels::cpu: oneDNN matmul + OpenMP), which every test runs, or a
// device backend's (kernels/cuda, namespace kernels::cuda). That is why every tensor here is
// memory of the Context's device and every call takes the Context.
//
// Conventions: row-major; shapes in comments as (rows, cols); "+=" outputs accumulate (grads
// accumulate over micro-batches), "=" outputs are overwritten. Results are deterministic: the
// same inputs and thread count give bitwise-identical outputs (no atomic sums, fixed reduction
// order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/rope_frequencies.hpp"
#include "tensor/device.hpp"
#include "tensor/tensor.hpp"

namespace trident::kernels {

// How the GEMMs on 16-bit operands (optim.precision = bf16 | fp16) run on the CPU, the deck's
// kernels.low16_gemm: native = oneDNN's matmul on the 16-bit type; widened = the operands
// widened (exactly) to f32 in a tracked workspace and multiplied in f32 — the same products (a
// product of two 16-bit values is exact in f32), summed in f32, so the results agree to f32
// rounding; automatic = native where oneDNN creates that matmul on this CPU, else widened.
enum class Low16Gemm { automatic, native, widened };

class Backend;  // kernels/backend.hpp

// How the CPU sums (the deck's kernels.arithmetic): native = the fastest kernels of this CPU
// (oneDNN's GEMM, LayerNorm and GELU, whose blocking and instruction set set the order of their
// sums, and loops vectorized at the build's width); portable = our own kernels in a fixed order
// everywhere (GEMM sums over k one term after another, LayerNorm and softmax sums in index
// order, no oneDNN), so that every x86-64 and AArch64 CPU gives the same bits for the same thread
// count — slower, for reproducing a run on other machines and for proving that a change left the
// arithmetic alone (scripts/reference-runs.sh).
enum class Arithmetic { native, portable };

// Where and how kernels run: a value the job builds once (load_job) and passes down, never a
// process-wide default. backend: the kernel backend (null: the CPU's); stream: the queue on its
// device (null on the CPU, a cudaStream_t on CUDA). low16_gemm: the path of the CPU's 16-bit
// GEMMs (a job's is kernels.low16_gemm agreed over all ranks; automatic probes this CPU).
// arithmetic: native or portable (above; the CPU's kernels read it, CUDA's ignore it).
// attention_operands: the type the memory-efficient attention may round q, k, v, dy, the
// probabilities and dS to for its matrix products (the job's optim.precision, or fp32 with
// cuda.attention_products = f32): CUDA's tiled kernels multiply them on the tensor cores in bf16
// or fp16 (FlashAttention's arithmetic), summing in f32; fp32 keeps every product in f32. The CPU
// computes in f32 whatever it says. gelu_epilogues: CUDA's GELU layer runs its GEMMs with
// cuBLASLt's GELU_AUX / DGELU epilogues (false: the GEMM and a pass apart, as where cuBLASLt
// offers no algorithm; cuda.gelu_epilogues = off, for comparison). The CPU has none either way.
// library_attention: CUDA's flash attention runs on cuDNN's fused attention where cuDNN takes the
// call (false: on our kernels alone; cuda.attention_kernel = own). The CPU runs its own.
class OpTimes;  // kernels/op_times.hpp
enum class Precision { fp32, bf16, fp16 };  // a model's storage: f32, or 16-bit values (below)
struct Context {
  Backend* backend = nullptr;
  Stream stream;
  Low16Gemm low16_gemm = Low16Gemm::automatic;
  Arithmetic arithmetic = Arithmetic::native;
  Precision attention_operands = Precision::fp32;
  bool gelu_epilogues = true;
  bool library_attention = true;
  OpTimes* op_times = nullptr;  // `trident bench --ops`: each operation timed into it (null: not)
};

// ---- 16-bit storage (mixed precision: optim.precision = bf16 | fp16) -------------------------
// A bfloat16 value: the upper 16 bits of an IEEE float32.
using bf16 = uint16_t;
// A 16-bit value of the model's storage type: bf16 or IEEE binary16 (fp16), as Precision says.
using low16 = uint16_t;
const char* precision_name(Precision precision);  // "fp32", "bf16", "fp16"

// Where the matrices of a (batch, heads) grid of matrices live, in elements: entry (row, col) of
// matrix (b, h) is at data[b·batch + h·head + row·row + col·col]. A transposed operand is the
// same memory with row and col swapped; attention reads heads straight out of the fused qkv
// activation this way, without copies.
struct Strides {
  int64_t batch, head, row, col;
};

// A block of ring attention (context parallelism, model/context_parallel.hpp): queries of chunk
// q_chunk against keys and values of chunk k_chunk, each chunk `rows` rows of every sequence
// (rows [chunk·rows, (chunk + 1)·rows)); causal: the same positions (key s visible to query t
// where s ≤ t), else every key is visible (an earlier chunk of the sequence). first: the query
// chunk's first block, whose result is written into out and lse rather than folded into them.
struct AttentionBlock {
  int q_chunk, k_chunk, rows;
  bool causal;
  bool first = false;
};

// The parameters of one AdamW update (kernels::adamw_update) it applies weight decay to or not:
// elements [begin, begin + count) of its tensors (LayerNorm weights and biases go without).
struct AdamWSegment {
  int64_t begin, count;
  bool decay;
};

// A training step's scalars on the device (f64 each; kernels::step_control), so that the step's
// decisions need no host round trip: the loss sum and the squared gradient norm's two parts
// (summed over the groups by device collectives), then the loss, the norm, the factor AdamW
// multiplies the gradients by, and the skip flag (a NaN or Inf: no update). One read of them at
// the step's end is all the host waits for.
enum StepScalar : int {
  kLossSum, kSquaresSplit, kSquaresReplicated, kLoss, kGradNorm, kUpdateScale, kSkipStep, kStepScalars
};

// The storage type of a precision (fp32: f32), and the precision of a 16-bit storage type.
constexpr DType storage_dtype(Precision precision) {
  return precision == Precision::bf16 ? DType::bf16 : precision == Precision::fp16 ? DType::fp16 : DType::f32;
}
constexpr Precision precision_of(DType dtype) {
  return dtype == DType::bf16 ? Precision::bf16 : dtype == DType::fp16 ? Precision::fp16 : Precision::fp32;
}

// The operations every backend provides (the kernel table's entries), in one list shared with
// the backends' own namespaces: kernels/ops.inc.
#include "kernels/ops.inc"

// ---- The CPU backend's 16-bit GEMM path --------------------------------------------------------
// The CPU's instruction set as oneDNN uses it ("avx2", "avx512_core", "avx512_core_bf16",
// "avx512_core_amx", ...), capped by DNNL_MAX_CPU_ISA.
std::string cpu_isa();
// Whether oneDNN creates a matmul on operands of this 16-bit type on this CPU (asked once per
// type, by creating a small one; fp32: always).
bool native_low16_gemm_available(Precision precision);
// Whether ctx's GEMMs in this precision widen their 16-bit operands (never for fp32, nor on a
// backend whose kernels are not the CPU's: Backend::runs_cpu_kernels).
bool widens_low16(const Context& ctx, Precision precision);
// One line on the path ctx's GEMMs take in this precision, e.g. "bf16 GEMM: native
// avx512_core_amx (oneDNN brg:avx512_core_bf16)", "bf16 GEMM: widened to f32 (no bf16 matmul on
// avx2)", "fp32 GEMM: avx512_core_amx".
std::string gemm_path_summary(const Context& ctx, Precision precision);
// GEMM primitives created so far in this process (the tests hold prepare_* to what runs).
int64_t gemm_primitives_created();

// ---- The CPU backend's per-thread workspaces ---------------------------------------------------
// Floats each OpenMP thread of the CPU's flash attention holds (kernels/cpu/flash_attention.cpp):
// heads of hs channels, q rows q_stride elements apart, k and v rows kv_stride apart, blocks of
// `rows` query rows, the values in 16 bits (widened tile by tile into it) or not. A call's
// workspace is that for each of omp_get_max_threads() threads, kept at the largest need so far
// (kernels/cpu/workspace.hpp); the memory model counts it so.
int64_t cpu_flash_attention_thread_floats(int hs, int64_t q_stride, int64_t kv_stride, int rows, bool low16);
// Floats each OpenMP thread of the CPU's portable GEMM (kernels.arithmetic = portable,
// kernels/cpu/portable.cpp) holds for a GEMM over K: its panel of b, kept as that workspace is.
int64_t cpu_portable_gemm_thread_floats(int64_t K);

// ---- The CUDA backend's workspaces -----------------------------------------------------------
// cuBLASLt's workspace, one for each stream that runs GEMMs (kernels/cuda/matmul.cu): what NVIDIA
// suggests for Hopper, plenty for Ampere. The memory model counts it so.
constexpr int64_t kCudaGemmWorkspaceBytes = int64_t(32) << 20;

}  // namespace trident::kernels
