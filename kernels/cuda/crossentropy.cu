// Softmax cross-entropy over a (possibly tensor-split) vocabulary, in the pieces of the CPU
// backend (kernels/ops.inc): one thread block per row for the row's max and Σ exp (block
// reductions in a fixed order), one thread per row for the losses, one block per row for the
// gradient; and for rows of the whole vocabulary all of it in one kernel that reads each row once
// (crossentropy_forward_backward). The per-element arithmetic is kernels/common/rows.hpp's.
#include "kernels/common/rows.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

constexpr int kRowThreads = 512;

__global__ void row_max_kernel(float* maxes, const float* logits, int valid, int ld) {
  const float* row = logits + static_cast<size_t>(blockIdx.x) * ld;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < valid; i += blockDim.x) m = row[i] > m ? row[i] : m;
  m = block_max(m);
  if (threadIdx.x == 0) maxes[blockIdx.x] = m;
}

__global__ void row_sums_kernel(float* sums, float* target_logits, const float* logits, const float* maxes,
                                const int32_t* targets, int vocab_begin, int valid, int ld) {
  const float* row = logits + static_cast<size_t>(blockIdx.x) * ld;
  const float m = maxes[blockIdx.x];
  float sum = 0.0f;
  for (int i = threadIdx.x; i < valid; i += blockDim.x) sum += vexp(row[i] - m);
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    sums[blockIdx.x] = sum;
    const int column = slice_column(targets[blockIdx.x], vocab_begin, valid);
    target_logits[blockIdx.x] = column >= 0 ? row[column] : 0.0f;
  }
}

__global__ void losses_kernel(float* losses, float* log_normalizers, const float* maxes, const float* sums,
                              const float* target_logits, int N) {
  FOR_EACH_ELEMENT(n, static_cast<size_t>(N)) crossentropy_row(maxes[n], sums[n], target_logits[n], losses[n], log_normalizers[n]);
}

// dlogits may alias logits: each element is read once, then written, by the same thread.
// Out: F32Out, or Low16Out (a 16-bit model's dlogits, rounded as written).
template <class Out>
__global__ void backward_kernel(Out dlogits, const float* logits, const float* log_normalizers,
                                const int32_t* targets, int vocab_begin, float scale, int valid, int ld) {
  const size_t offset = static_cast<size_t>(blockIdx.x) * ld;
  const float shift = log_normalizers[blockIdx.x];
  const int target = slice_column(targets[blockIdx.x], vocab_begin, valid);
  for (int i = threadIdx.x; i < ld; i += blockDim.x) {
    const float d = i < valid ? crossentropy_gradient(logits[offset + i], shift, scale) : 0.0f;
    dlogits(offset + i, i == target ? d - scale : d);
  }
}

// The four kernels above in one for rows of the whole vocabulary: the row's valid logits read
// once into shared memory (valid floats), then its max, Σ exp, loss and gradient computed from
// there by the same threads in the same order and with the same block reductions as
// row_max_kernel, row_sums_kernel, losses_kernel and backward_kernel — the same bits, with one
// read of the logits where those make three. dlogits may alias logits (every row is in shared
// memory before it is written).
template <class Out>
__global__ void forward_backward_kernel(float* losses, float* log_normalizers, Out dlogits, const float* logits,
                                        const int32_t* targets, float scale, int valid, int ld) {
  extern __shared__ float row[];  // (valid)
  __shared__ float shift;         // the row's log-normalizer, for every thread
  const size_t offset = static_cast<size_t>(blockIdx.x) * ld;
  float m = -INFINITY;
#pragma unroll 8  // several loads in flight a thread: one block of 512 threads holds an SM
  for (int i = threadIdx.x; i < valid; i += blockDim.x) {
    row[i] = logits[offset + i];
    m = row[i] > m ? row[i] : m;
  }
  m = block_max(m);  // (its synchronisation also makes every thread's row values visible)
  float sum = 0.0f;
  for (int i = threadIdx.x; i < valid; i += blockDim.x) sum += vexp(row[i] - m);
  sum = block_sum(sum);
  const int target = slice_column(targets[blockIdx.x], 0, valid);
  if (threadIdx.x == 0) {
    crossentropy_row(m, sum, target >= 0 ? row[target] : 0.0f, losses[blockIdx.x], log_normalizers[blockIdx.x]);
    shift = log_normalizers[blockIdx.x];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < ld; i += blockDim.x) {
    const float d = i < valid ? crossentropy_gradient(row[i], shift, scale) : 0.0f;
    dlogits(offset + i, i == target ? d - scale : d);
  }
}

// Rows whose valid logits fit in a block's shared memory (loss_row_fits): GPT-2's 50,257
// (201 KB) on an H100 or H200 (227 KB), not on an A100 (163 KB).
bool row_fits(int valid) { return loss_row_fits(valid, static_cast<double>(shared_memory_limit())); }

}  // namespace

void crossentropy_row_max(Context& ctx, float* maxes, const float* logits, int N, int valid, int ld) {
  if (N == 0) return;
  row_max_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(maxes, logits, valid, ld);
  check_launch("crossentropy_row_max");
}

void crossentropy_row_sums(Context& ctx, float* sums, float* target_logits, const float* logits, const float* maxes,
                           const int32_t* targets, int vocab_begin, int N, int valid, int ld) {
  if (N == 0) return;
  row_sums_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(sums, target_logits, logits, maxes, targets, vocab_begin,
                                                         valid, ld);
  check_launch("crossentropy_row_sums");
}

void crossentropy_losses(Context& ctx, float* losses, float* log_normalizers, const float* maxes, const float* sums,
                         const float* target_logits, int N) {
  if (N == 0) return;
  losses_kernel<<<blocks_for(N), kThreads, 0, stream_of(ctx)>>>(losses, log_normalizers, maxes, sums, target_logits,
                                                                 N);
  check_launch("crossentropy_losses");
}

void crossentropy_backward(Context& ctx, float* dlogits, const float* logits, const float* log_normalizers,
                           const int32_t* targets, int vocab_begin, float scale, int N, int valid, int ld) {
  if (N == 0) return;
  backward_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(F32Out{dlogits}, logits, log_normalizers, targets, vocab_begin,
                                                         scale, valid, ld);
  check_launch("crossentropy_backward");
}

void crossentropy_backward_low16(Context& ctx, Precision precision, low16* dlogits, const float* logits,
                                 const float* log_normalizers, const int32_t* targets, int vocab_begin, float scale,
                                 int N, int valid, int ld) {
  if (N == 0) return;
  with_type(precision, [&](auto fp16) {
    backward_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(Low16Out<decltype(fp16)::value>{dlogits}, logits,
                                                           log_normalizers, targets, vocab_begin, scale, valid, ld);
  });
  check_launch("crossentropy_backward");
}

// One kernel where the row fits in shared memory; else the pieces in turn, their per-row results
// in a stream-ordered scratch.
void crossentropy_forward_backward(Context& ctx, float* losses, float* log_normalizers, float* dlogits,
                                   low16* dlogits_low, Precision precision, const float* logits,
                                   const int32_t* targets, float scale, int N, int valid, int ld) {
  if (N == 0) return;
  if (!row_fits(valid)) {
    float* rows = stream_scratch(ctx, 3 * static_cast<size_t>(N), "cudaMallocAsync (cross-entropy's rows)");
    float *maxes = rows, *sums = rows + N, *target_logits = rows + 2 * N;
    crossentropy_row_max(ctx, maxes, logits, N, valid, ld);
    crossentropy_row_sums(ctx, sums, target_logits, logits, maxes, targets, 0, N, valid, ld);
    crossentropy_losses(ctx, losses, log_normalizers, maxes, sums, target_logits, N);
    release_scratch(ctx, rows);
    if (dlogits_low == nullptr)
      return crossentropy_backward(ctx, dlogits, logits, log_normalizers, targets, 0, scale, N, valid, ld);
    return crossentropy_backward_low16(ctx, precision, dlogits_low, logits, log_normalizers, targets, 0, scale, N, valid,
                                       ld);
  }
  const size_t bytes = static_cast<size_t>(valid) * sizeof(float);
  auto launch = [&](auto out) {
    const auto kernel = forward_backward_kernel<decltype(out)>;
    // Each output type's kernel: the most dynamic shared memory it was allowed so far. Not 48 KB
    // at first: without the opt-in a block's static and dynamic bytes together stay under 48 KB,
    // and the reductions' static bytes would leave a row of 12,225 to 12,288 values unlaunchable.
    static size_t allowed = 0;
    if (bytes > allowed) {
      allow_shared(kernel, bytes);
      allowed = bytes;
    }
    kernel<<<N, kRowThreads, bytes, stream_of(ctx)>>>(losses, log_normalizers, out, logits, targets, scale, valid, ld);
  };
  if (dlogits_low == nullptr) launch(F32Out{dlogits});
  else with_type(precision, [&](auto fp16) { launch(Low16Out<decltype(fp16)::value>{dlogits_low}); });
  check_launch("crossentropy_forward_backward");
}

}  // namespace trident::kernels::cuda
