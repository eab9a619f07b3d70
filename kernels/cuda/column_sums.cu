// Column sums on the device in two deterministic passes (kernels/cuda/cuda.hpp): the bias
// gradients of the linear layers (of f32 or 16-bit values); LayerNorm's parameter gradients use
// the second pass too.
#include "kernels/common/low16.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

// The 16-bit values of a precision, read widened (exact): x[i] as an f32 pointer's.
template <bool fp16>
struct Widened {
  const low16* bits;
  __device__ float operator[](size_t i) const { return low16_widen<fp16>(bits[i]); }
};

// partial[chunk, c] = Σ x[r, c] over the chunk's rows, in row order: one thread per (chunk, c).
// Values: const float*, or Widened.
template <class Values>
__global__ void chunk_sums_kernel(float* partial, Values x, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (c >= cols) return;
  const int end = min(rows, (chunk + 1) * kColumnChunk);
  float sum = 0.0f;
  for (int r = chunk * kColumnChunk; r < end; ++r) sum += x[static_cast<size_t>(r) * cols + c];
  partial[static_cast<size_t>(chunk) * cols + c] = sum;
}

// out[c] += Σ partial[chunk, c] in chunk order: one thread per column.
__global__ void add_chunk_sums_kernel(float* out, const float* partial, int chunks, int cols) {
  FOR_EACH_ELEMENT(c, static_cast<size_t>(cols)) {
    float sum = 0.0f;
    for (int chunk = 0; chunk < chunks; ++chunk) sum += partial[static_cast<size_t>(chunk) * cols + c];
    out[c] += sum;
  }
}

}  // namespace

float* stream_scratch(Context& ctx, size_t n, const char* what) {
  void* scratch = nullptr;
  check(cudaMallocAsync(&scratch, n * sizeof(float), stream_of(ctx)), what);
  return static_cast<float*>(scratch);
}

void release_scratch(Context& ctx, float* scratch) { check(cudaFreeAsync(scratch, stream_of(ctx)), "cudaFreeAsync"); }

void add_chunk_sums(Context& ctx, float* out, const float* partial, int chunks, int cols) {
  if (cols == 0) return;
  add_chunk_sums_kernel<<<blocks_for(cols), kThreads, 0, stream_of(ctx)>>>(out, partial, chunks, cols);
  check_launch("add_chunk_sums");
}

namespace {

template <class Values>
void add_column_sums(Context& ctx, float* out, Values x, int rows, int cols) {
  if (rows == 0 || cols == 0) return;
  const int chunks = column_chunks(rows);
  float* partial = stream_scratch(ctx, static_cast<size_t>(chunks) * cols, "cudaMallocAsync (column sums)");
  chunk_sums_kernel<<<dim3(blocks_for(cols), chunks), kThreads, 0, stream_of(ctx)>>>(partial, x, rows, cols);
  check_launch("column_sums_add");
  add_chunk_sums(ctx, out, partial, chunks, cols);
  release_scratch(ctx, partial);
}

}  // namespace

void column_sums_add(Context& ctx, float* out, const float* x, int rows, int cols) {
  add_column_sums(ctx, out, x, rows, cols);
}

void column_sums_add_low16(Context& ctx, Precision precision, float* out, const low16* x, int rows, int cols) {
  with_type(precision, [&](auto fp16) { add_column_sums(ctx, out, Widened<decltype(fp16)::value>{x}, rows, cols); });
}

}  // namespace trident::kernels::cuda
