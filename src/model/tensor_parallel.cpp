// Tensor-parallel layers (the math and communication are stated in the header).
#include "model/tensor_parallel.hpp"

#include <algorithm>

#include "core/clock.hpp"
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
// capture there is nothing to wait for); Transformer's fence after each pass completes it.
void TensorGroup::all_reduce(float* data, size_t n, comm::Op op) const {
  if (slice.size == 1) return;
  settle([&] { return collectives->all_reduce(data, n, DType::f32, op, stream); });
}

namespace {
double g_waited_seconds = 0;  // take_tensor_wait_seconds(): the host's waits, one model per process
}  // namespace

double take_tensor_wait_seconds() {
  const double seconds = g_waited_seconds;
  g_waited_seconds = 0;
  return seconds;
}

// On the host the operation is timed from its call (MPI's collectives run inside it) to its
// completion: the exposed tensor-parallel time.
void TensorGroup::settle(const std::function<comm::Work()>& operation) const {
  if (!stream.device.is_cpu()) return operation().leave_to_stream();
  const double start = steady_seconds();
  operation().wait();
  g_waited_seconds += steady_seconds() - start;
}

void TensorGroup::all_reduce_sum(float* data, size_t n) const { all_reduce(data, n, comm::Op::Sum); }

void TensorGroup::all_reduce_max(float* data, size_t n) const { all_reduce(data, n, comm::Op::Max); }

TensorGroup TensorGroup::whole_rows() const {
  TensorGroup group = *this;
  group.sequence_parallel = false;
  return group;
}

// M divisible by the group (the deck's check): segment_of's segments are whole rows.
void TensorGroup::sum_partial(float* data, int M, int K) const {
  const size_t n = static_cast<size_t>(M) * K;
  if (!splits_rows()) return all_reduce_sum(data, n);
  settle([&] { return collectives->reduce_scatter(data, n, DType::f32, comm::Op::Sum, stream); });
}

void TensorGroup::all_gather_rows(kernels::Context& ctx, const Tensor& gathered, const Tensor& local) const {
  const int64_t n = static_cast<int64_t>(local.numel());
  const Tensor mine = gathered.elements(slice.rank * n, n);
  if (mine.data != local.data) kernels::copy(ctx, mine, local.reshaped(mine.shape));
  settle([&] { return collectives->all_gather(gathered.data, static_cast<size_t>(n) * slice.size, gathered.dtype, stream); });
}

namespace {

// The first M rows of (at least M, K) row-major data: a scratch seen as (M, K).
Tensor leading_rows(const Tensor& t, int M, int K) { return t.elements(0, int64_t(M) * K).reshaped({M, K}); }

// Rows block j of (p·m, width) row-major data.
Tensor block_of(const Tensor& t, int j, int blocks) {
  const int64_t width = t.shape.dims[t.shape.rank - 1], rows = int64_t(t.numel()) / width / blocks;
  return t.elements(j * rows * width, rows * width).reshaped({rows, width});
}

}  // namespace

// Step k holds block j = r − k: it goes on to r + 1 while block j − 1 arrives from r − 1 and
// use() reads block j.
void TensorGroup::ring_all_gather(kernels::Context& ctx, const Tensor& gathered, const Tensor& local,
                                  const std::function<void(int, const Tensor&)>& use) const {
  const int p = slice.size, r = slice.rank, next = (r + 1) % p, previous = (r + p - 1) % p;
  const Tensor mine = block_of(gathered, r, p);
  if (mine.data != local.data) kernels::copy(ctx, mine, local.reshaped(mine.shape));
  for (int k = 0; k < p; ++k) {
    const int j = (r - k + p) % p;
    const Tensor held = block_of(gathered, j, p);
    comm::Work passing;  // held on to r + 1, block j − 1 in from r − 1, at once
    if (k < p - 1) {
      const Tensor arriving = block_of(gathered, (j + p - 1) % p, p);
      passing = collectives->send_recv(held.data, arriving.data, held.numel(), held.dtype, next, previous, k, stream);
    }
    use(j, held);
    settle([&] { return std::move(passing); });
  }
}

// Step k: this rank's part of block j = r − 1 − k, plus the sum of ranks r − k … r − 1's parts
// arriving from r − 1 meanwhile, on to r + 1; at k = p − 1, j = r: the whole sum, kept. A step's
// sum goes on to r + 1 as the next step's arrives from r − 1, at once, while the next part is
// produced.
void TensorGroup::ring_reduce_scatter(kernels::Context& ctx, const Tensor& partial,
                                      const std::function<void(int, const Tensor&)>& produce) const {
  const int p = slice.size, r = slice.rank, next = (r + 1) % p, previous = (r + p - 1) % p;
  const Tensor block = block_of(partial, 0, p);
  const Tensor arriving = incoming.elements(0, block.numel()).reshaped(block.shape);
  comm::Work passing;  // the previous step's sum out, this step's arriving in
  for (int k = 0; k < p; ++k) {
    const int j = (r - 1 - k + 2 * p) % p;
    const Tensor part = block_of(partial, j, p);
    produce(j, part);
    if (k > 0) {
      settle([&] { return std::move(passing); });  // arriving in; the sent block is not touched again
      kernels::add_inplace(ctx, part, arriving);
    }
    if (k < p - 1)
      passing = collectives->send_recv(part.data, arriving.data, part.numel(), part.dtype, next, previous, p + k + 1,
                                       stream);
  }
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
  const Tensor all = leading_rows(gathered, M, K);
  group.all_gather_rows(ctx, all, x);
  return all;
}

// The 16-bit values of dy's rows block j that the GEMMs read (empty in fp32).
Tensor low_block(const GemmMode& mode, int j, int p, int M, int N) {
  if (mode.dy_low.data == nullptr) return Tensor{};
  const int64_t m = M / p;
  return mode.dy_low.elements(j * m * N, m * N).reshaped({m, N});
}

// linear_backward on a block of dY's rows with its 16-bit values dy_low: rounded from dy there, or
// (mode.dy_low_written) written by dY's producer, the bias gradient then summed from dy alone.
void gradient_gemms(kernels::Context& ctx, const GemmMode& mode, const Tensor& dx, const Tensor& dw, const Tensor& db,
                    const Tensor& dy, const Tensor& dy_low, const Operand& x, const Operand& w) {
  if (!mode.dy_low_written) return kernels::linear_backward(ctx, dx, dw, db, dy, dy_low, x, w);
  kernels::linear_backward(ctx, dx, dw, Tensor{}, Tensor{}, dy_low, x, w);
  if (db.data != nullptr) kernels::bias_gradient(ctx, db, dy);
}

// dX = dY A_i by blocks into the reduce-scatter ring (with db), then dA_i by blocks as X's
// travel the all-gather ring again.
void column_parallel_backward_overlapped(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                                         float* dx, float* dw_local, float* db_local, const float* dy_local,
                                         const Operand& x, const Tensor& gathered, const Operand& w_local, int M,
                                         int K, int N_local) {
  const int p = group.slice.size;
  const Tensor dy = on_device(ctx, dy_local, {M, N_local}), db = on_device(ctx, db_local, {N_local});
  const Operand rows_shape = x.reshaped({M / p, K});  // what linear_backward reads M and K of (x itself unread)
  group.ring_reduce_scatter(ctx, on_device(ctx, dx, {M, K}), [&](int j, const Tensor& into) {
    gradient_gemms(ctx, mode, into, Tensor{}, db, block_of(dy, j, p), low_block(mode, j, p, M, N_local), rows_shape,
                   w_local);
  });
  if (dw_local == nullptr) return;
  const Tensor dw = on_device(ctx, dw_local, {N_local, K});
  group.ring_all_gather(ctx, leading_rows(gathered, M, K), x, [&](int j, const Tensor& rows) {
    gradient_gemms(ctx, mode, Tensor{}, dw, Tensor{}, block_of(dy, j, p), low_block(mode, j, p, M, N_local), rows,
                   w_local);
  });
}

}  // namespace

void column_parallel_forward(kernels::Context& ctx, const TensorGroup& group, const Tensor& y_local, const Operand& x,
                             const Tensor& gathered, const Operand& w_local, const float* b_local, int M, int K,
                             int N_local) {
  const Tensor y = y_local.reshaped({M, N_local}), bias = on_device(ctx, b_local, {N_local});
  if (group.overlaps()) {  // Y_j = X_j A_iᵀ + b_i as each X_j arrives
    const int p = group.slice.size;
    group.ring_all_gather(ctx, leading_rows(gathered, M, K), x, [&](int j, const Tensor& rows) {
      kernels::linear_forward(ctx, block_of(y, j, p), rows, w_local, bias);
    });
    return;
  }
  kernels::linear_forward(ctx, y, gathered_input(ctx, group, x, gathered, M, K), w_local, bias);
}

void column_parallel_gelu_forward(kernels::Context& ctx, const TensorGroup& group, const GeluOutputs& out,
                                  const Operand& x, const Tensor& gathered, const Operand& w_local,
                                  const float* b_local, int M, int K, int N_local) {
  const Tensor pre = out.pre.reshaped({M, N_local}), act = out.act.reshaped({M, N_local});
  const Tensor bias = on_device(ctx, b_local, {N_local});
  if (group.overlaps()) {  // block j of each output as X_j arrives
    const int p = group.slice.size;
    group.ring_all_gather(ctx, leading_rows(gathered, M, K), x, [&](int j, const Tensor& rows) {
      kernels::linear_gelu_forward(ctx, block_of(pre, j, p), block_of(act, j, p), rows, w_local, bias);
    });
    return;
  }
  kernels::linear_gelu_forward(ctx, pre, act, gathered_input(ctx, group, x, gathered, M, K), w_local, bias);
}

void column_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                              float* dx, float* dw_local, float* db_local, const float* dy_local,
                              const Operand& x, const Tensor& gathered, const Operand& w_local, int M, int K,
                              int N_local) {
  if (group.overlaps()) return column_parallel_backward_overlapped(ctx, mode, group, dx, dw_local, db_local, dy_local, x,
                                                                   gathered, w_local, M, K, N_local);
  const Operand input = dw_local ? gathered_input(ctx, group, x, gathered, M, K) : x.reshaped({group.local_rows(M), K});
  gradient_gemms(ctx, mode, on_device(ctx, dx, {M, K}), on_device(ctx, dw_local, {N_local, K}),
                 on_device(ctx, db_local, {N_local}), on_device(ctx, dy_local, {M, N_local}), mode.dy_low, input, w_local);
  group.sum_partial(dx, M, K);
}

void row_parallel_forward(kernels::Context& ctx, const TensorGroup& group, float* y, const Tensor& kept,
                          float* partial, const float* residual, const Operand& x_local, const Operand& w_local,
                          const float* bias, int M, int K_local, int N) {
  const Tensor sums = on_device(ctx, partial, {M, N});
  const int rows = group.local_rows(M);
  if (group.overlaps()) {  // each block's part X_i[rows j] B_iᵀ computed as the sum so far arrives
    const Operand x = x_local.reshaped({M, K_local});
    group.ring_reduce_scatter(ctx, sums, [&](int j, const Tensor& into) {
      kernels::linear_forward(ctx, into, block_of(x, j, group.slice.size), w_local, Tensor{});
    });
  } else {
    kernels::linear_forward(ctx, sums, x_local.reshaped({M, K_local}), w_local, Tensor{});
    group.sum_partial(partial, M, N);
  }
  const Tensor out = on_device(ctx, y, {rows, N}), sum = on_device(ctx, partial + group.first_row(M) * N, {rows, N});
  const Tensor stream = on_device(ctx, residual, {rows, N});
  if (bias == nullptr) return kernels::residual_forward(ctx, out, stream, sum, kept);  // llama
  kernels::bias_residual_forward(ctx, out, stream, sum, on_device(ctx, bias, {N}), kept);
}

namespace {

// Under sequence parallelism with dY's 16-bit values written by its producer (this rank's rows of
// mode.dy_low), those travel instead of the f32 rows — half the bytes — and the bias gradient
// comes from this rank's f32 rows, summed over the group (rows_bias_gradient).
bool gathers_written_rows(const GemmMode& mode, const TensorGroup& group) {
  return mode.dy_low_written && group.splits_rows();
}

// The row-parallel backward's dY (M, N) by blocks of rows, use(j, blocks, rows, their 16-bit
// values or empty): where the group overlaps, block j of p as it arrives on the all-gather ring;
// otherwise every row at once as block 0 of 1 (gathered first with sequence parallelism). Where
// the 16-bit rows travel (gathers_written_rows), the f32 rows given to use() are empty.
void each_gradient_block(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group, const float* dy,
                         float* gathered_dy, int M, int N,
                         const std::function<void(int, int, const Tensor&, const Tensor&)>& use) {
  const int p = group.slice.size;
  if (gathers_written_rows(mode, group)) {
    const Tensor all = leading_rows(mode.dy_low, M, N), mine = block_of(all, group.slice.rank, p);
    if (group.overlaps())
      return group.ring_all_gather(ctx, all, mine, [&](int j, const Tensor& rows) { use(j, p, Tensor{}, rows); });
    group.all_gather_rows(ctx, all, mine);
    return use(0, 1, Tensor{}, all);
  }
  const Tensor gathered = on_device(ctx, gathered_dy, {M, N}), mine = on_device(ctx, dy, {group.local_rows(M), N});
  if (group.overlaps()) {
    group.ring_all_gather(ctx, gathered, mine,
                          [&](int j, const Tensor& dy_rows) { use(j, p, dy_rows, low_block(mode, j, p, M, N)); });
    return;
  }
  use(0, 1, gathered_input(ctx, group, mine, gathered, M, N), low_block(mode, 0, 1, M, N));
}

// db (N) += Σ over the M rows of dY, from this rank's f32 rows (M/p, N): their column sums in
// `scratch` (N), all-reduced over the group, then added (db holds earlier micro-batches' sums).
void rows_bias_gradient(kernels::Context& ctx, const TensorGroup& group, const Tensor& db, const float* dy,
                        float* scratch, int M, int N) {
  if (db.data == nullptr) return;
  const Tensor sums = on_device(ctx, scratch, {N});
  kernels::clear(ctx, sums);
  kernels::bias_gradient(ctx, sums, on_device(ctx, dy, {group.local_rows(M), N}));
  group.all_reduce_sum(scratch, static_cast<size_t>(N));
  kernels::add_inplace(ctx, db, sums);
}

}  // namespace

// Each block of dY: dX_i's rows of it, dB_i and db += (db from the rows alone where the 16-bit
// rows travel).
void row_parallel_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group, float* dx_local,
                           float* dw_local, float* dbias, const float* dy, float* gathered_dy,
                           const Operand& x_local, const Operand& w_local, int M, int K_local, int N) {
  const Tensor dx = on_device(ctx, dx_local, {M, K_local}), x = x_local.reshaped({M, K_local});
  const Tensor dw = on_device(ctx, dw_local, {N, K_local}), db = on_device(ctx, dbias, {N});
  const bool rows_only = gathers_written_rows(mode, group);
  each_gradient_block(ctx, mode, group, dy, gathered_dy, M, N,
                      [&](int j, int blocks, const Tensor& dy_rows, const Tensor& dy_low) {
                        gradient_gemms(ctx, mode, block_of(dx, j, blocks), dw, rows_only ? Tensor{} : db, dy_rows,
                                       dy_low, block_of(x, j, blocks), w_local);
                      });
  if (rows_only) rows_bias_gradient(ctx, group, db, dy, gathered_dy, M, N);
}

// Each block of dY: linear_backward without dx (dW, db, and in 16-bit mode dY narrowed into its
// 16-bit values), then the fused GEMM from those values into the block's rows of dpre (dbias_in
// summed block by block).
void row_parallel_gelu_backward(kernels::Context& ctx, const GemmMode& mode, const TensorGroup& group,
                                const GeluGradient& out, float* dw_local, float* dbias, const float* dy,
                                float* gathered_dy, const Operand& x_local, const Operand& w_local, int M, int K_local,
                                int N) {
  const Tensor dpre = out.dpre.reshaped({M, K_local});
  const Tensor pre = out.pre.reshaped({M, K_local}), x = x_local.reshaped({M, K_local});
  const Tensor dw = on_device(ctx, dw_local, {N, K_local}), db = on_device(ctx, dbias, {N});
  const bool rows_only = gathers_written_rows(mode, group);
  each_gradient_block(ctx, mode, group, dy, gathered_dy, M, N,
                      [&](int j, int blocks, const Tensor& dy_rows, const Tensor& dy_low) {
                        gradient_gemms(ctx, mode, Tensor{}, dw, rows_only ? Tensor{} : db, dy_rows, dy_low,
                                       block_of(x, j, blocks), w_local);
                        kernels::linear_gelu_backward(ctx, block_of(dpre, j, blocks), out.dbias_in,
                                                      dy_low.data != nullptr ? dy_low : dy_rows,
                                                      block_of(pre, j, blocks), w_local);
                      });
  if (rows_only) rows_bias_gradient(ctx, group, db, dy, gathered_dy, M, N);
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
    if (wpe != nullptr) kernels::positions_forward(ctx, embedded, positions);
    return;
  }
  const Tensor sums = on_device(ctx, partial, {B, T, C});
  kernels::embedding_forward(ctx, sums, on_device(ctx, tokens, {B, T}), wte_local, vocab.begin);
  if (group.slice.rank == 0 && wpe != nullptr) kernels::positions_forward(ctx, sums, positions);
  group.sum_partial(partial, B * T, C);
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
  if (dwpe != nullptr) kernels::positions_backward(ctx, on_device(ctx, dwpe, {T, C}), gradient);
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
