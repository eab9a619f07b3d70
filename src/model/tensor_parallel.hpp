// The tensor-parallel layers (Megatron-LM's scheme) over a tensor group of p ranks. Each states
// its math and its communication. With p = 1 they are the serial layers and communicate nothing.
//
// ColumnParallelLinear  Y_i = X A_iᵀ + b_i      A split by output rows (A_i: (N/p, K)),
//                                               X (M, K) replicated, Y_i (M, N/p) local.
//   forward: no communication (identity on X).
//   backward: dX = Σ_i dY_i A_i — partial on every rank: all-reduce (sum) over the group.
//             dA_i += dY_iᵀ X, db_i += Σ_m dY_i: local.
//   Used for QKV (heads split: each rank the q, k, v rows of NH/p heads) and the MLP's C→4C.
//
// RowParallelLinear     Y = Σ_i X_i B_iᵀ + b    B split by input columns (B_i: (N, K/p)),
//                                               X_i (M, K/p) local, Y (M, N) replicated.
//   forward: all-reduce (sum) of the partial products, then the bias (replicated), once.
//   backward: dX_i = dY B_i, dB_i += dYᵀ X_i: local; db += Σ_m dY: identical on every rank.
//   Used for the attention output projection and the MLP's 4C→C.
//
// In 16-bit mode (bf16, fp16) X and A are the 16-bit values the model stores; the products are
// summed in f32 into f32 outputs, and the all-reduces run on those f32 values. Backward's GEMMs
// read dY rounded to the 16-bit type — rounded there, or written so by dY's producer
// (GemmMode::dy_low_written) — and db is summed from the f32 dY.
//
// VocabParallelEmbedding   E[t] = wte[x_t] over a vocabulary split by rows (wte_i: (Vp/p, C)).
//   forward: rank i looks up the tokens of its rows, 0 for the others; all-reduce (sum).
//   backward: dwte_i += dE at its own tokens: local.
//
// VocabParallelCrossEntropy   logits_i = H wte_iᵀ (M, Vp/p), never gathered.
//   forward: row maxes all-reduced (max); Σ exp(logit − max) and the target's logit (held by
//            one rank, 0 elsewhere) all-reduced (sum) together; loss = log Σ + max − target.
//   backward: dlogits_i = (softmax_i − onehot_i) · scale: local; dH = Σ_i dlogits_i wte_i is
//             partial: all-reduce (sum); dwte_i += dlogits_iᵀ H: local.
//
// Sequence parallelism (parallel.sequence_parallel; Korthikanti et al. 2022, §4.2.2): outside the
// two layers above — the LayerNorms, the residual stream, the embedding's output, what the
// pipeline sends — each rank holds m = M/p of the micro-batch's M = B·T token rows, rank i the
// rows [i·m, (i+1)·m) (for B = 1 the sequence's positions; for B > 1 the rows of the flattened
// (B·T) batch: every op there is row-wise, so which rows a rank holds is free). Each all-reduce
// above becomes a reduce-scatter or all-gather of the same data, its conjugate in backward:
//   ColumnParallelLinear  forward: X = all-gather(X_i) (M, K) before the GEMM — in 16-bit mode
//                         the stored 16-bit values; backward: X gathered again for dA (the layer
//                         keeps X_i, not X), dX (M, K) partial: reduce-scatter (sum) → dX_i.
//   RowParallelLinear     forward: Y_i = reduce-scatter(Σ_i X_i B_iᵀ) (m, N), then bias and the
//                         residual on those rows; backward: dY = all-gather(dY_i) (M, N), then the
//                         GEMMs and db from dY (whole on every rank: identical, no reduction) —
//                         in 16-bit mode the rows the GEMMs read (2 bytes a value) are gathered
//                         and db = all-reduce(Σ over dY_i's rows) (N values).
//   VocabParallelEmbedding  forward: reduce-scatter instead of the all-reduce (rank 0 adds wpe to
//                         its partial sum first); backward: all-gather(dE_i), then dwte_i and dwpe
//                         from all M rows (dwpe identical on every rank).
//   LayerNorm on X_i:     dγ, dβ from m rows are partial: all-reduce (sum) of the block's (2C).
// The head (final LayerNorm on X_i, then H = all-gather) runs VocabParallelCrossEntropy on all M
// rows, whose dH all-reduce leaves every rank all of dH; its LayerNorm reads its own rows.
// Per block: forward 2 all-gathers + 2 reduce-scatters of (M, C) — the volume of the 2
// all-reduces they replace; backward the same plus the 2 re-gathers of the LayerNorm outputs.
//
// Overlapped with the GEMMs (parallel.tp_comm_overlap, with sequence parallelism; Wang et al.
// 2023's collective matmul, Megatron-Core's ring-exchange TP overlap): each all-gather that feeds
// a GEMM and each reduce-scatter that a GEMM feeds runs as a ring of p steps over blocks of m
// rows, the step's GEMM on the block already here while the next block travels:
//   all-gather + GEMM: step k holds rows block j = r − k, sends it to r + 1 and receives block
//     j − 1 from r − 1 while the GEMM reads block j (the column-parallel forward's Y_j = X_j A_iᵀ;
//     backward dA_i += dY_jᵀ X_j; the row-parallel backward's dX_i rows j = dY_j B_i, dB_i += ...).
//   GEMM + reduce-scatter: step k computes this rank's part of block j = r − 1 − k while the
//     partial sum of block j from ranks r − k … r − 1 arrives from r − 1, adds it and sends the
//     sum on to r + 1; after p steps block r is whole here (the row-parallel forward's Y_r; the
//     column-parallel backward's dX_r). The sums are in ring order: fp32 rounding apart from the
//     collectives'.
// Each step's send and receive are posted together (Communicator::send_recv): every rank's
// transfer of a step in flight at once.
#pragma once

#include <cstddef>
#include <functional>

#include "comm/communicator.hpp"
#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/tensor.hpp"

namespace trident::model {

struct TensorGroup {
  Partition slice;                              // this rank's part of the model
  comm::Communicator* collectives = nullptr;  // the tensor group's; null when slice.size == 1
  Stream stream;  // where the activations live and kernels run (Transformer sets it): the collectives' stream
  bool sequence_parallel = false;  // parallel.sequence_parallel (see above)
  bool overlap = false;            // parallel.tp_comm_overlap: the rings above (with sequence parallelism)
  Tensor incoming;  // overlap: (M/p, width) f32, where the reduce-scatter ring's arriving block lands
  // The rows outside the parallel layers are split over the group (sequence parallelism over
  // more than one rank).
  bool splits_rows() const { return sequence_parallel && slice.size > 1; }
  // Of M token rows: how many this rank holds outside the parallel layers, and the first.
  int local_rows(int M) const { return splits_rows() ? M / slice.size : M; }
  int64_t first_row(int M) const { return splits_rows() ? int64_t(slice.rank) * local_rows(M) : 0; }
  // The same group with every row on every rank: the head's classifier.
  TensorGroup whole_rows() const;
  // In place over the group, on `stream`: complete on return on the host; on a device left to
  // the stream (what reads the result is enqueued after it) until fence().
  void all_reduce_sum(float* data, size_t n) const;
  void all_reduce_max(float* data, size_t n) const;
  // On (M, K) row-major data. sum_partial sums a GEMM's partial products over the group: all
  // of them on every rank (all-reduce), or with sequence parallelism this rank's rows, from
  // first_row(M) (reduce-scatter; the other rows are scratch afterwards). all_gather_rows puts
  // `local` (local_rows(M), K), any dtype, into this rank's rows of `gathered` (M, K) (no copy
  // where it is already there) and every rank's rows into the rest.
  void sum_partial(float* data, int M, int K) const;
  void all_gather_rows(kernels::Context& ctx, const Tensor& gathered, const Tensor& local) const;
  // The overlap's rings, on (M, width) row-major data of p blocks of m rows. ring_all_gather:
  // `local` into this rank's block of `gathered`, then use(j, block j) on each block as it is here
  // (this rank's first). ring_reduce_scatter: produce(j, into) writes this rank's part of block j
  // into that block of `partial`; the parts travel and sum, and block r of `partial` ends whole.
  bool overlaps() const { return overlap && splits_rows(); }
  void ring_all_gather(kernels::Context& ctx, const Tensor& gathered, const Tensor& local,
                       const std::function<void(int, const Tensor&)>& use) const;
  void ring_reduce_scatter(kernels::Context& ctx, const Tensor& partial,
                           const std::function<void(int, const Tensor&)>& produce) const;
  // Complete once this rank's all-reduces so far have run, under the group's watchdog (a
  // device's; complete at once on the host and for a group of one).
  comm::Work fence() const;

 private:
  void all_reduce(float* data, size_t n, comm::Op op) const;
  // The operation started: complete on the host (timed), left to the stream on a device.
  void settle(const std::function<comm::Work()>& operation) const;
};

// Seconds this process's host waited for tensor-group communication since the last call (CPU;
// on a device the collectives are left to the stream): the exposed tensor-parallel time.
double take_tensor_wait_seconds();

// A GEMM operand as the model holds it, typed: f32 values (fp32), or in 16-bit mode (bf16,
// fp16) the 16-bit values it stores, which the GEMM reads directly.
using Operand = Tensor;
// How the linear layers multiply: the precision (the operands' dtype), and in 16-bit mode a
// scratch of at least (M, N) values of that type for the output gradient dy, which backward's
// GEMMs read in 16 bits — or dy's own memory, narrowed in place (kernels::narrow) by the caller.
// dy_low_written: dy_low holds dy's values rounded already, written by dy's producer as it
// computed them (a norm's backward, the flash attention's: no pass narrows dy); the f32 dy is
// then read for the bias gradient alone. A row-parallel layer under sequence parallelism has its
// rank's rows written (at their place in the (M, N) dy_low): the 16-bit rows are all-gathered,
// not the f32 ones (half the bytes), and its bias gradient is summed from the rank's f32 rows and
// all-reduced (N values).
struct GemmMode {
  kernels::Precision precision = kernels::Precision::fp32;
  Tensor dy_low;
  bool dy_low_written = false;
};

// x (M, K), w_local (N_local, K), y_local (M, N_local): f32, or of x's 16-bit type (a kept
// activation the GEMM writes, kernels::linear_forward). Sequence-parallel group: x is this rank's
// rows (M/p, K), gathered into `gathered` (M, K) of x's dtype first.
void column_parallel_forward(kernels::Context& ctx, const TensorGroup& group, const Tensor& y_local, const Operand& x,
                             const Tensor& gathered, const Operand& w_local, const float* b_local, int M, int K,
                             int N_local);
// The same layer followed by GPT-2's GELU, in one operation per GEMM (kernels::linear_gelu_forward:
// on CUDA the GELU in the GEMM's epilogue): pre (M, N_local) = X A_iᵀ + b_i and act (M, N_local) =
// GELU(pre), both in pre's dtype (the model's kept type: no f32 copy of either on a device).
struct GeluOutputs {
  Tensor pre, act;
};
void column_parallel_gelu_forward(kernels::Context& ctx, const TensorGroup& group, const GeluOutputs& out,
                                  const Operand& x, const Tensor& gathered, const Operand& w_local,
                                  const float* b_local, int M, int K, int N_local);
// dx (M, K) = (all-reduced); dw_local, db_local += (null: skipped). Sequence-parallel group: x
// is this rank's rows, gathered again into `gathered`, and dx reduce-scattered: this rank's
// (M/p, K) at dx + first_row(M)·K.
void column_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                              float* dx, float* dw_local, float* db_local, const float* dy_local,
                              const Operand& x, const Tensor& gathered, const Operand& w_local, int M, int K,
                              int N_local);
// y (M, N) = residual + (Σ x_local w_localᵀ + bias): the block's residual connection fused in
// (bias null: none, llama), and with it y's 16-bit kept copy where `kept` is one (y then holds
// its values: kernels::bias_residual_forward). partial: (M, N) scratch. Sequence-parallel group:
// y, residual and kept are this rank's rows (M/p, N).
void row_parallel_forward(kernels::Context& ctx, const TensorGroup& group, float* y, const Tensor& kept,
                          float* partial, const float* residual, const Operand& x_local, const Operand& w_local,
                          const float* bias, int M, int K_local, int N);
// dx_local (M, K_local) =; dw_local, dbias += (null: skipped). Sequence-parallel group: dy is
// this rank's rows (M/p, N), gathered into `gathered_dy` (M, N) f32 first — or, its 16-bit rows
// written (mode.dy_low_written), those gathered in mode.dy_low, gathered_dy an (N) scratch.
void row_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group, float* dx_local,
                           float* dw_local, float* dbias, const float* dy, float* gathered_dy,
                           const Operand& x_local, const Operand& w_local, int M, int K_local, int N);
// The MLP's output layer backward with GELU's backward fused in (GPT-2; kernels::linear_gelu_backward:
// on CUDA GELU' in the input-gradient GEMM's epilogue): dw_local, dbias and the communication as
// row_parallel_backward's, and in place of dx_local the gradient of the GELU's input,
// dpre (M, K_local) = (dY W_i) ⊙ GELU'(pre), in pre's dtype (16-bit mode: what the input layer's
// GEMMs read, no f32 copy on a device), with the input layer's bias gradient dbias_in (K_local) +=
// Σ dpre (or empty). pre (M, K_local): the kept values. dY's values as the GEMMs read them: f32,
// or in 16-bit mode mode.dy_low.
struct GeluGradient {
  Tensor dpre, dbias_in, pre;
};
void row_parallel_gelu_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                                const GeluGradient& out, float* dw_local, float* dbias, const float* dy,
                                float* gathered_dy, const Operand& x_local, const Operand& w_local, int M, int K_local,
                                int N);

// dw_local (N_local, K) += dyᵀ x, the weight gradient of either layer alone: local, no
// communication. What a zero-bubble schedule's weight-gradient pass runs after the
// input-gradient pass (the backward above with dw_local null) kept dy: f32 in fp32, the rounded
// 16-bit values in 16-bit mode — what the GEMM would have read.
void weight_gradient(kernels::Context& ctx, float* dw_local, const Tensor& dy, const Operand& x,
                     const Operand& w_local, int M, int K, int N_local);

// The vocabulary rows [begin, begin + rows) this rank holds.
struct VocabSlice {
  int begin = 0, rows = 0, valid = 0;  // valid: rows that are real tokens (< V)
};
VocabSlice vocab_slice(const GptConfig& config, const Partition& slice);

// out (B, T, C) = wte[tokens] + wpe (the positions are replicated, added after the all-reduce);
// wte_local (vocab.rows, C) f32 or 16-bit (widened). Sequence-parallel group: out is this
// rank's rows (B·T/p, C), and `partial` (B, T, C) the scratch the sums are reduce-scattered in.
void vocab_parallel_embedding_forward(kernels::Context& ctx, const TensorGroup& group,
                                      const VocabSlice& vocab, float* out, float* partial, const int32_t* tokens,
                                      const Tensor& wte_local, const float* wpe, int B, int T, int C);
// wpe / dwpe null: no learned positions (llama). Sequence-parallel group: dout is this rank's
// rows, gathered into `gathered` (B, T, C) first.
void vocab_parallel_embedding_backward(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                                       float* dwte_local, float* dwpe, const float* dout, float* gathered,
                                       const int32_t* tokens, int B, int T, int C);

// losses (N) and log_normalizers (N) from this rank's logits (N, vocab.rows). scratch: 3N.
void vocab_parallel_cross_entropy(kernels::Context& ctx, const TensorGroup& group,
                                  const VocabSlice& vocab, float* losses, float* log_normalizers,
                                  float* scratch, const float* logits, const int32_t* targets, int N);

}  // namespace trident::model
