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
  settle(collectives->all_reduce(data, n, DType::f32, op, stream));
}

void TensorGroup::settle(comm::Work work) const {
  if (stream.device.is_cpu()) work.wait();
  else work.leave_to_stream();
}

void TensorGroup::all_reduce_sum(float* data, size_t n) const { all_reduce(data, n, comm::Op::Sum); }

void TensorGroup::all_reduce_max(float* data, size_t n) const { all_reduce(data, n, comm::Op::Max); }

TensorGroup TensorGroup::whole_rows() const {
  TensorGroup group = *this;
  group.sequence_parallel = false;
  return group;
}

// M divisible by the group (the deck's check): segment_of's segments are whole rows.
void TensorGroup::reduce_scatter_rows(float* data, int M, int K) const {
  if (!splits_rows()) return;
  settle(collectives->reduce_scatter(data, static_cast<size_t>(M) * K, DType::f32, comm::Op::Sum, stream));
}

void TensorGroup::all_gather_rows(kernels::Context& ctx, const Tensor& gathered, const Tensor& local) const {
  const int64_t n = static_cast<int64_t>(local.numel());
  const Tensor mine = gathered.elements(slice.rank * n, n);
  if (mine.data != local.data) kernels::copy(ctx, mine, local.reshaped(mine.shape));
  settle(collectives->all_gather(gathered.data, static_cast<size_t>(n) * slice.size, gathered.dtype, stream));
}

comm::Work TensorGroup::fence() const {
  if (slice.size == 1 || stream.device.is_cpu()) return comm::Work{};
  return collectives->fence(stream);
}

namespace {

// The GEMM's input: x itself, or with sequence parallelism every rank's rows gathered.
Operand gathered_input(kernels::Context& ctx, const TensorGroup& group, const Operand& x, const Tensor& gathered,
                       int M, int K) {
  if (!group.splits_rows()) return x.reshaped({M, K});
  const Tensor all = gathered.elements(0, int64_t(M) * K).reshaped({M, K});
  group.all_gather_rows(ctx, all, x);
  return all;
}

}  // namespace

void column_parallel_forward(kernels::Context& ctx, const TensorGroup& group, float* y_local, const Operand& x,
                             const Tensor& gathered, const Operand& w_local, const float* b_local, int M, int K,
                             int N_local) {
  kernels::linear_forward(ctx, on_device(ctx, y_local, {M, N_local}), gathered_input(ctx, group, x, gathered, M, K),
                          w_local, on_device(ctx, b_local, {N_local}));
}

void column_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                              float* dx, float* dw_local, float* db_local, const float* dy_local,
                              const Operand& x, const Tensor& gathered, const Operand& w_local, int M, int K,
                              int N_local) {
  const Operand input = dw_local ? gathered_input(ctx, group, x, gathered, M, K) : x.reshaped({group.local_rows(M), K});
  kernels::linear_backward(ctx, on_device(ctx, dx, {M, K}), on_device(ctx, dw_local, {N_local, K}),
                           on_device(ctx, db_local, {N_local}), on_device(ctx, dy_local, {M, N_local}), mode.dy_low,
                           input, w_local);
  if (group.splits_rows()) group.reduce_scatter_rows(dx, M, K);
  else group.all_reduce_sum(dx, static_cast<size_t>(M) * K);
}

void row_parallel_forward(kernels::Context& ctx, const TensorGroup& group, float* y, float* partial,
                          const float* residual, const Operand& x_local, const Operand& w_local,
                          const float* bias, int M, int K_local, int N) {
  kernels::linear_forward(ctx, on_device(ctx, partial, {M, N}), x_local.reshaped({M, K_local}), w_local, Tensor{});
  const int rows = group.local_rows(M);
  if (group.splits_rows()) group.reduce_scatter_rows(partial, M, N);
  else group.all_reduce_sum(partial, static_cast<size_t>(M) * N);
  kernels::bias_residual_forward(ctx, on_device(ctx, y, {rows, N}), on_device(ctx, residual, {rows, N}),
                                 on_device(ctx, partial + group.first_row(M) * N, {rows, N}), on_device(ctx, bias, {N}));
}

void row_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group, float* dx_local,
                           float* dw_local, float* dbias, const float* dy, float* gathered_dy,
                           const Operand& x_local, const Operand& w_local, int M, int K_local, int N) {
  const Tensor gradient = gathered_input(ctx, group, on_device(ctx, dy, {group.local_rows(M), N}),
                                         on_device(ctx, gathered_dy, {M, N}), M, N);
  kernels::linear_backward(ctx, on_device(ctx, dx_local, {M, K_local}), on_device(ctx, dw_local, {N, K_local}),
                           on_device(ctx, dbias, {N}), gradient, mode.dy_low, x_local.reshaped({M, K_local}), w_local);
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

// With sequence parallelism the positions go into rank 0's partial sum before the
// reduce-scatter: no kernel for a strided part of wpe, and the sum is the same.
void vocab_parallel_embedding_forward(kernels::Context& ctx, const TensorGroup& group,
                                      const VocabSlice& vocab, float* out, float* partial, const int32_t* tokens,
                                      const Tensor& wte_local, const float* wpe, int B, int T, int C) {
  const Tensor positions = on_device(ctx, wpe, {T, C});
  if (!group.splits_rows()) {
    const Tensor embedded = on_device(ctx, out, {B, T, C});
    kernels::embedding_forward(ctx, embedded, on_device(ctx, tokens, {B, T}), wte_local, vocab.begin);
    group.all_reduce_sum(out, static_cast<size_t>(B) * T * C);
    kernels::positions_forward(ctx, embedded, positions);
    return;
  }
  const Tensor sums = on_device(ctx, partial, {B, T, C});
  kernels::embedding_forward(ctx, sums, on_device(ctx, tokens, {B, T}), wte_local, vocab.begin);
  if (group.slice.rank == 0) kernels::positions_forward(ctx, sums, positions);
  group.reduce_scatter_rows(partial, B * T, C);
  const int64_t rows = group.local_rows(B * T);
  kernels::copy(ctx, on_device(ctx, out, {rows, C}), sums.elements(group.first_row(B * T) * C, rows * C).reshaped({rows, C}));
}

void vocab_parallel_embedding_backward(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                                       float* dwte_local, float* dwpe, const float* dout, float* gathered,
                                       const int32_t* tokens, int B, int T, int C) {
  const Tensor gradient =
      gathered_input(ctx, group, on_device(ctx, dout, {group.local_rows(B * T), C}), on_device(ctx, gathered, {B * T, C}),
                     B * T, C).reshaped({B, T, C});
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
