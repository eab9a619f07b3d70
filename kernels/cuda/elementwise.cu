// Element-wise kernels: GELU, residual adds, AdamW, and the deterministic sum of squares, each
// element computed by the arithmetic shared with the CPU tests (kernels/common/elementwise.hpp).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/common/elementwise.hpp"
#include "kernels/common/low16.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n) {
  FOR_EACH_ELEMENT(i, n) out[i] = gelu_value(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  FOR_EACH_ELEMENT(i, n) dinp[i] = gelu_gradient(inp[i], dout[i]);
}

template <bool fp16>
__global__ void gelu_backward_low16_kernel(float* dinp, const low16* inp, const float* dout, size_t n) {
  FOR_EACH_ELEMENT(i, n) dinp[i] = gelu_gradient(low16_widen<fp16>(inp[i]), dout[i]);
}

// pre = sums rounded; act = GELU(pre's value) rounded.
template <bool fp16>
__global__ void keep_with_gelu_kernel(low16* pre, low16* act, const float* sums, size_t n) {
  FOR_EACH_ELEMENT(i, n) {
    const low16 rounded = low16_round<fp16>(sums[i]);
    pre[i] = rounded;
    act[i] = low16_round<fp16>(gelu_value(low16_widen<fp16>(rounded)));
  }
}

// A residual connection writes its sums into out alone (F32Out), or into out and its kept 16-bit
// copy in the same pass (KeptOut, as store_low).
template <class Out>
__global__ void residual_kernel(Out out, const float* a, const float* b, size_t n) {
  FOR_EACH_ELEMENT(i, n) out(i, a[i] + b[i]);
}

// out (M, N) = residual + (x + bias[n])
template <class Out>
__global__ void bias_residual_kernel(Out out, const float* residual, const float* x, const float* bias, int M, int N) {
  FOR_EACH_ELEMENT(i, static_cast<size_t>(M) * N) out(i, residual[i] + (x[i] + bias[i % N]));
}

// launch(out) with the writer of out and, where kept is not null, its kept copy.
template <class Launch>
void with_residual_out(float* out, Precision precision, low16* kept, Launch&& launch) {
  if (kept == nullptr) return launch(F32Out{out});
  with_type(precision, [&](auto fp16) { launch(KeptOut<decltype(fp16)::value>{out, kept}); });
}

__global__ void add_inplace_kernel(float* acc, const float* x, size_t n) {
  FOR_EACH_ELEMENT(i, n) acc[i] += x[i];
}

// dst's columns [dst_first, dst_first + width) of each row (=, or += accumulate: f32 only) src's.
template <class E>
__global__ void copy_columns_kernel(E* dst, int dst_width, int dst_first, const E* src, int src_width,
                                    int src_first, int rows, int width, bool accumulate) {
  FOR_EACH_ELEMENT(i, static_cast<size_t>(rows) * width) {
    const size_t r = i / width, c = i % width;
    E& to = dst[r * dst_width + dst_first + c];
    const E from = src[r * src_width + src_first + c];
    to = accumulate ? to + from : from;
  }
}

// Up to kAdamWSegments segments of one launch, passed by value (no table to upload), and where each
// ends in the launch's elements taken in order (ends[i]: the counts of segments 0 … i). The grid
// strides over all of them at once, each element's segment found by a binary search over ends:
// no block idles on a short segment (a grid per segment sized by the longest would launch 16 ×
// 151 K blocks for GPT-2's 16 tensors, 2.4 M, where 0.5 M have work).
constexpr int kAdamWSegments = 64;
struct AdamWSegments {
  AdamWSegment at[kAdamWSegments];
  int64_t ends[kAdamWSegments];
  int count;
};

// The segment of element j of the launch (j < ends[count − 1]): the first whose end is past j.
__device__ int segment_of(const AdamWSegments& segments, size_t j) {
  int low = 0, high = segments.count - 1;
  while (low < high) {
    const int mid = (low + high) / 2;
    if (size_t(segments.ends[mid]) > j) high = mid;
    else low = mid + 1;
  }
  return low;
}

// With params_low: the updated parameter rounded into the 16-bit copy as well (fp16 or bf16).
// control (or null): {the gradients' factor, skip} decided on the device (step_control).
__global__ void adamw_kernel(float* params, uint16_t* params_low, bool fp16, const float* grads, float* m, float* v,
                             AdamWSegments segments, AdamWStep step, const double* control) {
  if (control != nullptr && control[1] != 0.0) return;
  AdamWStep scaled = step;
  if (control != nullptr) scaled.grad_scale = static_cast<float>(control[0]);
  const size_t total = size_t(segments.ends[segments.count - 1]), stride = size_t(gridDim.x) * blockDim.x;
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < total; j += stride) {
    const int k = segment_of(segments, j);
    const AdamWSegment& s = segments.at[k];
    const size_t i = size_t(s.begin) + (j - (k > 0 ? size_t(segments.ends[k - 1]) : 0));
    AdamWStep segment_step = scaled;
    if (!s.decay) segment_step.weight_decay = 0.0f;
    float p = params[i], m_i = m[i], v_i = v[i];
    adamw_element(segment_step, p, grads[i], m_i, v_i);
    params[i] = p, m[i] = m_i, v[i] = v_i;
    if (params_low != nullptr) params_low[i] = fp16 ? fp16_round(p) : bf16_round(p);
  }
}

// One part of sums_of_squares: its elements, and the index of its first chunk among all parts'.
struct SquaresPart {
  const float* x;
  size_t n, first_chunk;
};

// partial[chunk] = Σ x² over one chunk of one part, in the CPU's fixed order: kLanes threads a
// chunk, of all parts at once (a chunk's part found by binary search over the parts' first chunks).
// Thread l of a chunk sums its lane l (x[begin + l], x[begin + l + kLanes], …: the chunk's
// threads read consecutive values together, coalesced), then the chunk's first thread adds the
// tail and the lanes' sums in lane order, as sum_of_squares_chunk does. kLanes (16) divides the
// warp and the grid's stride, so a chunk's threads are one half-warp, all active together.
__device__ void chunk_sums(volatile double* partial, const SquaresPart* parts, size_t k, size_t chunks) {
  static_assert(32 % kSumOfSquaresLanes == 0, "a chunk's lanes are a part of one warp");
  FOR_EACH_ELEMENT(thread, chunks * kSumOfSquaresLanes) {
    const size_t chunk = thread / kSumOfSquaresLanes;
    const int lane = static_cast<int>(thread % kSumOfSquaresLanes);
    size_t low = 0, high = k;  // the last part whose first chunk is <= chunk
    while (high - low > 1) {
      const size_t mid = (low + high) / 2;
      if (parts[mid].first_chunk <= chunk) low = mid;
      else high = mid;
    }
    const SquaresPart part = parts[low];
    const size_t begin = (chunk - part.first_chunk) * kSumOfSquaresChunk;
    const size_t end = begin + kSumOfSquaresChunk < part.n ? begin + kSumOfSquaresChunk : part.n;
    const size_t tail = sum_of_squares_tail(begin, end);
    const double own = sum_of_squares_lane(part.x, begin, tail, lane);
    // This chunk's lanes within the warp: the half-warp of this thread.
    const unsigned lanes = ((1u << kSumOfSquaresLanes) - 1u)
                           << (threadIdx.x % 32 / kSumOfSquaresLanes * kSumOfSquaresLanes);
    double sum = lane == 0 ? sum_of_squares_tail_sum(part.x, tail, end) : 0.0;
    for (int l = 0; l < kSumOfSquaresLanes; ++l) {
      const double value = __shfl_sync(lanes, own, l, kSumOfSquaresLanes);
      if (lane == 0) sum += value;
    }
    if (lane == 0) partial[chunk] = sum;
  }
}

// out[g] = Σ over the parts of group g, in part order, of their chunks' partial sums in chunk
// order: the CPU's additions. Each part's chunks summed by a thread of its own (into part_sums),
// then one thread adds the parts into their groups (a handful of parts).
__device__ void group_sums(double* out, size_t groups, double* part_sums, const volatile double* partial,
                           const SquaresPart* parts, const int* group, size_t k, size_t chunks) {
  for (size_t p = threadIdx.x; p < k; p += blockDim.x) {
    const size_t end = p + 1 < k ? parts[p + 1].first_chunk : chunks;
    double sum = 0.0;
    for (size_t chunk = parts[p].first_chunk; chunk < end; ++chunk) sum += partial[chunk];
    part_sums[p] = sum;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (size_t g = 0; g < groups; ++g) out[g] = 0.0;
  for (size_t p = 0; p < k; ++p) out[group[p]] += part_sums[p];
}

// The gradient norm's sums in one launch: every block its chunks' sums, then the block that
// finishes last adds them all into the groups — the CUDA Programming Guide's single-kernel sum
// ("Memory Fence Functions"). Each thread's partial sums are made visible to the whole device
// (__threadfence) before its block counts itself done in blocks_done (zero at launch); the block
// that counts gridDim.x reads them through volatile loads, past its own L1. The additions and their
// order are those of two kernels (chunks, then groups): the same bits, without the second launch.
__global__ void sums_of_squares_kernel(double* out, size_t groups, double* partial, double* part_sums,
                                       const SquaresPart* parts, const int* group, size_t k, size_t chunks,
                                       unsigned* blocks_done) {
  __shared__ bool last_block;
  chunk_sums(partial, parts, k, chunks);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last_block = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
    __threadfence();
  }
  __syncthreads();
  if (last_block) group_sums(out, groups, part_sums, partial, parts, group, k, chunks);
}

__global__ void mean_losses_kernel(double* out, const double* sums, size_t m, double tokens) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = mean_loss_sum(sums, m, tokens);
}

__global__ void step_control_kernel(double* scalars, float clip, double gradient_scale, double loss_divisor) {
  if (blockIdx.x == 0 && threadIdx.x == 0) step_decisions(scalars, clip, gradient_scale, loss_divisor);
}

}  // namespace

void gelu_forward(Context& ctx, float* out, const float* inp, size_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, inp, n);
  check_launch("gelu_forward");
}

void gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, size_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dinp, inp, dout, n);
  check_launch("gelu_backward");
}

void gelu_backward_low16(Context& ctx, Precision precision, float* dinp, const low16* inp, const float* dout,
                         size_t n) {
  if (n == 0) return;
  with_type(precision, [&](auto fp16) {
    gelu_backward_low16_kernel<decltype(fp16)::value><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dinp, inp, dout, n);
  });
  check_launch("gelu_backward");
}

void keep_with_gelu(Context& ctx, Precision precision, low16* pre, low16* act, const float* sums, size_t n) {
  if (n == 0) return;
  with_type(precision, [&](auto fp16) {
    keep_with_gelu_kernel<decltype(fp16)::value><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(pre, act, sums, n);
  });
  check_launch("linear_gelu_forward");
}

void residual_forward(Context& ctx, float* out, const float* a, const float* b, size_t n, Precision precision,
                      low16* kept) {
  if (n == 0) return;
  with_residual_out(out, precision, kept, [&](auto writer) {
    residual_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(writer, a, b, n);
  });
  check_launch("residual_forward");
}

void bias_residual_forward(Context& ctx, float* out, const float* residual, const float* x, const float* bias, int M,
                           int N, Precision precision, low16* kept) {
  if (M == 0 || N == 0) return;
  with_residual_out(out, precision, kept, [&](auto writer) {
    bias_residual_kernel<<<blocks_for(static_cast<size_t>(M) * N), kThreads, 0, stream_of(ctx)>>>(writer, residual, x,
                                                                                                   bias, M, N);
  });
  check_launch("bias_residual_forward");
}

void add_inplace(Context& ctx, float* acc, const float* x, size_t n) {
  if (n == 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(acc, x, n);
  check_launch("add_inplace");
}

void copy_columns(Context& ctx, float* dst, int dst_width, int dst_first, const float* src, int src_width,
                  int src_first, int rows, int width, bool accumulate) {
  const size_t n = static_cast<size_t>(rows) * width;
  if (n == 0) return;
  copy_columns_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dst, dst_width, dst_first, src, src_width,
                                                                      src_first, rows, width, accumulate);
  check_launch("copy_columns");
}

void copy_columns_low16(Context& ctx, low16* dst, int dst_width, int dst_first, const low16* src, int src_width,
                        int src_first, int rows, int width) {
  const size_t n = static_cast<size_t>(rows) * width;
  if (n == 0) return;
  copy_columns_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dst, dst_width, dst_first, src, src_width,
                                                                      src_first, rows, width, false);
  check_launch("copy_columns");
}

// One launch per kAdamWSegments segments (one for GPT-2's 16 tensors), sized by their elements.
void adamw_update(Context& ctx, float* params, uint16_t* params_low, DType low_type, const float* grads, float* m,
                  float* v, const AdamWSegment* segments, size_t k, float lr, float beta1, float beta2, float eps,
                  float weight_decay, int64_t t, float grad_scale, const double* control) {
  const AdamWStep step = adamw_step(lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  for (size_t first = 0; first < k; first += kAdamWSegments) {
    const size_t count = std::min<size_t>(kAdamWSegments, k - first);
    AdamWSegments launch{};
    int64_t elements = 0;
    for (size_t i = 0; i < count; ++i) {
      launch.at[i] = segments[first + i];
      launch.ends[i] = elements += segments[first + i].count;
    }
    launch.count = static_cast<int>(count);
    if (elements == 0) continue;
    adamw_kernel<<<blocks_for(size_t(elements)), kThreads, 0, stream_of(ctx)>>>(
        params, params_low, low_type == DType::fp16, grads, m, v, launch, step, control);
    check_launch("adamw_update");
  }
}

// Each part its own group of sums_of_squares_into, then one transfer back: the CPU's sums, bit for
// bit up to the contraction of x·x + lane into one fused multiply-add.
void sums_of_squares(Context& ctx, double* sums, const float* const* parts, const size_t* counts, size_t k) {
  if (k == 0) return;
  cudaStream_t stream = stream_of(ctx);
  std::vector<int> own(k);
  for (size_t p = 0; p < k; ++p) own[p] = static_cast<int>(p);
  double* device_sums = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&device_sums), k * sizeof(double), stream),
        "cudaMallocAsync (sums_of_squares)");
  sums_of_squares_into(ctx, device_sums, k, parts, counts, own.data(), k);
  check(cudaMemcpyAsync(sums, device_sums, k * sizeof(double), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (sums_of_squares)");
  check(cudaFreeAsync(device_sums, stream), "cudaFreeAsync (sums_of_squares)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (sums_of_squares)");
}

// The chunks' partial sums as sums_of_squares computes them, then their groups, in one kernel on
// the device: nothing is read on the host. The parts' and groups' tables and the kernel's block
// counter (zero) go up from host memory in one copy, the scratch is freed in stream order.
void sums_of_squares_into(Context& ctx, double* out, size_t groups, const float* const* parts, const size_t* counts,
                          const int* group, size_t k) {
  // Host and device scratch alike: table (k parts), groups (k ints), the block counter, each padded
  // to doubles; on the device only, part_sums (k) and partial (chunks).
  const auto padded = [](size_t bytes) { return (bytes + sizeof(double) - 1) / sizeof(double) * sizeof(double); };
  const size_t table_bytes = padded(k * sizeof(SquaresPart)), group_bytes = padded(k * sizeof(int));
  const size_t upload_bytes = table_bytes + group_bytes + sizeof(double);
  std::vector<SquaresPart> table(k);
  size_t chunks = 0;
  for (size_t p = 0; p < k; ++p) {
    table[p] = {parts[p], counts[p], chunks};
    chunks += (counts[p] + kSumOfSquaresChunk - 1) / kSumOfSquaresChunk;
  }
  std::vector<char> upload(upload_bytes, 0);  // the counter's bytes stay zero
  std::memcpy(upload.data(), table.data(), k * sizeof(SquaresPart));
  std::memcpy(upload.data() + table_bytes, group, k * sizeof(int));
  cudaStream_t stream = stream_of(ctx);
  char* scratch = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&scratch), upload_bytes + (k + chunks) * sizeof(double), stream),
        "cudaMallocAsync (sums_of_squares_into)");
  auto* device_table = reinterpret_cast<SquaresPart*>(scratch);
  auto* device_group = reinterpret_cast<int*>(scratch + table_bytes);
  auto* blocks_done = reinterpret_cast<unsigned*>(scratch + table_bytes + group_bytes);
  auto* part_sums = reinterpret_cast<double*>(scratch + upload_bytes);
  double* partial = part_sums + k;
  check(cudaMemcpyAsync(scratch, upload.data(), upload_bytes, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync (sums_of_squares_into tables)");
  sums_of_squares_kernel<<<blocks_for(chunks * kSumOfSquaresLanes), kThreads, 0, stream>>>(
      out, groups, partial, part_sums, device_table, device_group, k, chunks, blocks_done);
  check_launch("sums_of_squares_into");
  check(cudaFreeAsync(scratch, stream), "cudaFreeAsync (sums_of_squares_into)");
  // The upload is pageable host memory, copied before the call returns (cudaMemcpyAsync from
  // pageable memory is staged synchronously), so it may go out of scope.
}

void mean_losses_into(Context& ctx, double* out, const double* sums, size_t m, double tokens) {
  mean_losses_kernel<<<1, 1, 0, stream_of(ctx)>>>(out, sums, m, tokens);
  check_launch("mean_losses_into");
}

void step_control(Context& ctx, double* scalars, float clip, double gradient_scale, double loss_divisor) {
  step_control_kernel<<<1, 1, 0, stream_of(ctx)>>>(scalars, clip, gradient_scale, loss_divisor);
  check_launch("step_control");
}

}  // namespace trident::kernels::cuda
