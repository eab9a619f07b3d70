// Softmax cross-entropy over a (possibly tensor-split) vocabulary, in the pieces of the CPU
// backend (kernels/ops.inc): one thread block per row for the row's max and Σ exp (block
// reductions in a fixed order), one thread per row for the losses, one block per row for the
// gradient. The per-element arithmetic is kernels/common/rows.hpp's.
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

}  // namespace trident::kernels::cuda
