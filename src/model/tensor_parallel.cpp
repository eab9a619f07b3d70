// Tensor-parallel layers (the math and communication are stated in the header).
#include "model/tensor_parallel.hpp"

#include <algorithm>

#include "kernels/backend.hpp"

namespace trident::model {
namespace {

// Memory of ctx's device at data seen as `shape`: what the kernels read their sizes from (null
// data: an absent optional buffer).
template <class T>
Tensor on_device(const kernels::Context& ctx, const T* data, Shape shape) {
  return view(data, shape, kernels::backend_of(ctx).device());
}

}  // namespace

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
  kernels::linear_forward(ctx, on_device(ctx, y_local, {M, N_local}), x.reshaped({M, K}), w_local,
                          on_device(ctx, b_local, {N_local}));
}

void column_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                              float* dx, float* dw_local, float* db_local, const float* dy_local,
                              const Operand& x, const Operand& w_local, int M, int K, int N_local) {
  kernels::linear_backward(ctx, on_device(ctx, dx, {M, K}), on_device(ctx, dw_local, {N_local, K}),
                           on_device(ctx, db_local, {N_local}), on_device(ctx, dy_local, {M, N_local}), mode.dy_low,
                           x.reshaped({M, K}), w_local);
  group.all_reduce_sum(dx, static_cast<size_t>(M) * K);
}

void row_parallel_forward(kernels::Context& ctx, const TensorGroup& group, float* y, float* partial,
                          const float* residual, const Operand& x_local, const Operand& w_local,
                          const float* bias, int M, int K_local, int N) {
  const Tensor sums = on_device(ctx, partial, {M, N});
  kernels::linear_forward(ctx, sums, x_local.reshaped({M, K_local}), w_local, Tensor{});
  group.all_reduce_sum(partial, static_cast<size_t>(M) * N);
  kernels::bias_residual_forward(ctx, on_device(ctx, y, {M, N}), on_device(ctx, residual, {M, N}), sums,
                                 on_device(ctx, bias, {N}));
}

void row_parallel_backward(kernels::Context& ctx, const GemmMode& mode, float* dx_local,
                           float* dw_local, float* dbias, const float* dy, const Operand& x_local,
                           const Operand& w_local, int M, int K_local, int N) {
  kernels::linear_backward(ctx, on_device(ctx, dx_local, {M, K_local}), on_device(ctx, dw_local, {N, K_local}),
                           on_device(ctx, dbias, {N}), on_device(ctx, dy, {M, N}), mode.dy_low,
                           x_local.reshaped({M, K_local}), w_local);
}

void weight_gradient(kernels::Context& ctx, float* dw_local, const Tensor& dy, const Operand& x,
                     const Operand& w_local, int M, int K, int N_local) {
  const bool rounded = dy.dtype != DType::f32;
  const Tensor values = dy.reshaped({M, N_local});
  kernels::linear_backward(ctx, Tensor{}, on_device(ctx, dw_local, {N_local, K}), Tensor{}, rounded ? Tensor{} : values,
                           rounded ? values : Tensor{}, x.reshaped({M, K}), w_local);
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
                                      const Tensor& wte_local, const float* wpe, int B, int T, int C) {
  const Tensor embedded = on_device(ctx, out, {B, T, C});
  kernels::embedding_forward(ctx, embedded, on_device(ctx, tokens, {B, T}), wte_local, vocab.begin);
  group.all_reduce_sum(out, static_cast<size_t>(B) * T * C);
  kernels::positions_forward(ctx, embedded, on_device(ctx, wpe, {T, C}));
}

void vocab_parallel_embedding_backward(kernels::Context& ctx, const VocabSlice& vocab,
                                       float* dwte_local, float* dwpe, const float* dout,
                                       const int32_t* tokens, int B, int T, int C) {
  const Tensor gradient = on_device(ctx, dout, {B, T, C});
  kernels::embedding_backward(ctx, on_device(ctx, dwte_local, {vocab.rows, C}), gradient,
                              on_device(ctx, tokens, {B, T}), vocab.begin);
  kernels::positions_backward(ctx, on_device(ctx, dwpe, {T, C}), gradient);
}

void vocab_parallel_cross_entropy(kernels::Context& ctx, const TensorGroup& group,
                                  const VocabSlice& vocab, float* losses, float* log_normalizers,
                                  float* scratch, const float* logits, const int32_t* targets, int N) {
  float* maxes = scratch;                // (N)
  float* sums_and_targets = scratch + N;  // (2N): Σ exp, then the target logits
  const Tensor rows = on_device(ctx, logits, {N, vocab.rows}), max = on_device(ctx, maxes, {N});
  const Tensor sums = on_device(ctx, sums_and_targets, {N}), target_logits = on_device(ctx, sums_and_targets + N, {N});
  kernels::crossentropy_row_max(ctx, max, rows, vocab.valid);
  group.all_reduce_max(maxes, N);
  kernels::crossentropy_row_sums(ctx, sums, target_logits, rows, max, on_device(ctx, targets, {N}), vocab.begin,
                                 vocab.valid);
  group.all_reduce_sum(sums_and_targets, 2 * static_cast<size_t>(N));
  kernels::crossentropy_losses(ctx, on_device(ctx, losses, {N}), on_device(ctx, log_normalizers, {N}), max, sums,
                               target_logits);
}

}  // namespace trident::model
