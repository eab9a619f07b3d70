// Device-side helpers of the CUDA kernels: the grid-stride loop of element-wise kernels, the
// outputs of either type, and
// block-wide reductions for the row kernels (one thread block per row): a fixed shuffle tree per
// warp, then the warps' results in warp order, so a row's sum is the same on every run (no
// atomics). blockDim.x must be a multiple of 32 (at most 1024); every thread gets the result.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/common/low16.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/kernels.hpp"

// Grid-stride loop: i over [0, n) in steps of the grid's threads.
#define FOR_EACH_ELEMENT(i, n)                                                                    \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n);         \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

namespace trident::kernels::cuda {

// A 16-bit kernel's launch for `precision`'s type: launch(std::true_type) for fp16,
// launch(std::false_type) for bf16 (the kernels' template <bool fp16> argument).
template <class Launch>
void with_type(Precision precision, Launch&& launch) {
  if (precision == Precision::fp16) launch(std::true_type{});
  else launch(std::false_type{});
}

// Where a row kernel writes its f32 results: an f32 output as they are (F32Out), a 16-bit one
// rounded to nearest even (Low16Out<fp16>) — the kernel templated on which.
struct F32Out {
  float* values;
  __device__ void operator()(size_t i, float value) const { values[i] = value; }
};
template <bool fp16>
struct Low16Out {
  low16* values;
  __device__ void operator()(size_t i, float value) const { values[i] = low16_round<fp16>(value); }
};

// Both: the value kept rounded in 16 bits and the f32 output set to that value (store's contract:
// what the f32 kernels read next is what is kept).
template <bool fp16>
struct KeptOut {
  float* out;
  low16* kept;
  __device__ void operator()(size_t i, float value) const {
    const low16 rounded = low16_round<fp16>(value);
    kept[i] = rounded;
    out[i] = low16_widen<fp16>(rounded);
  }
};

// Where a kernel writing an f32 gradient also writes its 16-bit copy (what the next GEMM reads,
// rounded as the value is final: no pass narrows it later) — none (NoCopy) or Low16Out<fp16>.
struct NoCopy {
  __device__ void operator()(size_t, float) const {}
};
template <class Launch>
void with_copy(Precision precision, low16* copy, Launch&& launch) {
  if (copy == nullptr) return launch(NoCopy{});
  with_type(precision, [&](auto fp16) { launch(Low16Out<decltype(fp16)::value>{copy}); });
}

// Where a kernel reads f32 values: an f32 input as it is (F32In), a 16-bit one widened as it is
// read (Low16In<fp16>: no f32 copy in device memory) — the kernel templated on which.
struct F32In {
  const float* values;
  __device__ float operator[](size_t i) const { return values[i]; }
};
template <bool fp16>
struct Low16In {
  const low16* values;
  __device__ float operator[](size_t i) const { return low16_widen<fp16>(values[i]); }
};

// launch(in) with the reader of `values`: f32 (precision fp32) or of precision's 16-bit type.
template <class Launch>
void with_input(Precision precision, const void* values, Launch&& launch) {
  if (precision == Precision::fp32) return launch(F32In{static_cast<const float*>(values)});
  with_type(precision, [&](auto fp16) { launch(Low16In<decltype(fp16)::value>{static_cast<const low16*>(values)}); });
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

template <class Op>
__device__ inline float warp_reduce(float value, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

template <class Op>
__device__ inline float block_reduce(float value, Op op, float identity) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  value = warp_reduce(value, op);
  __syncthreads();  // partial may still be read by a previous reduction
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  value = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : identity;
  return warp_reduce(value, op);
}

__device__ inline float block_sum(float value) { return block_reduce(value, SumOp{}, 0.0f); }
__device__ inline float block_max(float value) { return block_reduce(value, MaxOp{}, -INFINITY); }

// A kernel may use more than the default 48 KB of shared memory only when told so, once per
// process (the attribute is the device's, and a process drives one device; shared_memory_limit
// is the most it may ask). Not a stream operation: a graph's capture is unaffected, and the first
// call of each kernel runs before any capture anyway (Transformer::run_recorded).
template <class Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "cudaFuncSetAttribute (a kernel's dynamic shared memory)");
}

}  // namespace trident::kernels::cuda
