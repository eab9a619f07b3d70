// Tensor-parallel layers (the math and communication are stated in the header).
#include "model/tensor_parallel.hpp"

#include <algorithm>

namespace trident::model {

// On the host the all-reduce is complete here (MPI). On a device it stays on the stream: the
// GEMM or kernel that reads the result is enqueued after it there, so the host does not stop
// for it (a wait per all-reduce would leave the GPU idle between launches, and inside a graph
// capture there is nothing to wait for); Gpt2's fence after each pass completes it.
void TensorGroup::all_reduce(float* data, size_t n, comm::Op op) const {
  if (slice.size == 1) return;
  comm::Work reduced = collectives->all_reduce(data, n, DType::f32, op, stream);
  if (stream.device.is_cpu()) reduced.wait();
  else reduced.leave_to_stream();
}

void TensorGroup::all_reduce_sum(float* data, size_t n) const { all_reduce(data, n, comm::Op::Sum); }

void TensorGroup::all_reduce_max(float* data, size_t n) const { all_reduce(data, n, comm::Op::Max); }

comm::Work TensorGroup::fence() const {
  if (slice.size == 1 || stream.device.is_cpu()) return comm::Work{};
  return collectives->fence(stream);
}

void column_parallel_forward(kernels::Context& ctx, float* y_local, const Operand& x, const Operand& w_local,
                             const float* b_local, int M, int K, int N_local) {
  kernels::linear_forward(ctx, y_local, x, w_local, b_local, M, K, N_local);
}

void column_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                              float* dx, float* dw_local, float* db_local, const float* dy_local,
                              const Operand& x, const Operand& w_local, int M, int K, int N_local) {
  kernels::linear_backward(ctx, dx, dw_local, db_local, dy_local, mode.dy_low, x, w_local, M, K, N_local);
  group.all_reduce_sum(dx, static_cast<size_t>(M) * K);
}

void row_parallel_forward(kernels::Context& ctx, const TensorGroup& group, float* y, float* partial,
                          const float* residual, const Operand& x_local, const Operand& w_local,
                          const float* bias, int M, int K_local, int N) {
  kernels::linear_forward(ctx, partial, x_local, w_local, nullptr, M, K_local, N);
  group.all_reduce_sum(partial, static_cast<size_t>(M) * N);
  kernels::bias_residual_forward(ctx, y, residual, partial, bias, M, N);
}

void row_parallel_backward(kernels::Context& ctx, const GemmMode& mode, float* dx_local,
                           float* dw_local, float* dbias, const float* dy, const Operand& x_local,
                           const Operand& w_local, int M, int K_local, int N) {
  kernels::linear_backward(ctx, dx_local, dw_local, dbias, dy, mode.dy_low, x_local, w_local, M, K_local, N);
}

VocabSlice vocab_slice(const GptConfig& config, const Partition& slice) {
  VocabSlice v;
  v.rows = config.padded_vocab / slice.size;
  v.begin = slice.rank * v.rows;
  v.valid = std::clamp(config.vocab - v.begin, 0, v.rows);
  return v;
}

void vocab_parallel_embedding_forward(kernels::Context& ctx, const TensorGroup& group,
                                      const VocabSlice& vocab, float* out, const int32_t* tokens,
                                      const float* wte_local, const float* wpe, int B, int T, int C) {
  kernels::embedding_forward(ctx, out, tokens, wte_local, vocab.begin, vocab.rows, B, T, C);
  group.all_reduce_sum(out, static_cast<size_t>(B) * T * C);
  kernels::positions_forward(ctx, out, wpe, B, T, C);
}

void vocab_parallel_embedding_backward(kernels::Context& ctx, const VocabSlice& vocab,
                                       float* dwte_local, float* dwpe, const float* dout,
                                       const int32_t* tokens, int B, int T, int C) {
  kernels::embedding_backward(ctx, dwte_local, dout, tokens, vocab.begin, vocab.rows, B, T, C);
  kernels::positions_backward(ctx, dwpe, dout, B, T, C);
}

void vocab_parallel_cross_entropy(kernels::Context& ctx, const TensorGroup& group,
                                  const VocabSlice& vocab, float* losses, float* log_normalizers,
                                  float* scratch, const float* logits, const int32_t* targets, int N) {
  float* maxes = scratch;                // (N)
  float* sums_and_targets = scratch + N;  // (2N): Σ exp, then the target logits
  kernels::crossentropy_row_max(ctx, maxes, logits, N, vocab.valid, vocab.rows);
  group.all_reduce_max(maxes, N);
  kernels::crossentropy_row_sums(ctx, sums_and_targets, sums_and_targets + N, logits, maxes,
                                 targets, vocab.begin, N, vocab.valid, vocab.rows);
  group.all_reduce_sum(sums_and_targets, 2 * static_cast<size_t>(N));
  kernels::crossentropy_losses(ctx, losses, log_normalizers, maxes, sums_and_targets,
                               sums_and_targets + N, N);
}

}  // namespace trident::model
