// The 16-bit storage types on the device: convert, store, round_to and narrow, element by
// element with the rounding shared with the CPU tests (kernels/common/low16.hpp: round to
// nearest even, NaN kept, fp16 overflow to ±Inf, subnormals kept).
#include <stdexcept>
#include <string>

#include "kernels/common/low16.hpp"
#include "kernels/common/typed_low16.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

template <bool fp16>
__global__ void round_kernel(low16* out, const float* in, size_t n) {
  FOR_EACH_ELEMENT(i, n) out[i] = low16_round<fp16>(in[i]);
}

template <bool fp16>
__global__ void widen_kernel(float* out, const low16* in, size_t n) {
  FOR_EACH_ELEMENT(i, n) out[i] = low16_widen<fp16>(in[i]);
}

// kept = values rounded, values = kept widened.
template <bool fp16>
__global__ void store_kernel(low16* kept, float* values, size_t n) {
  const KeptOut<fp16> keep{values, kept};
  FOR_EACH_ELEMENT(i, n) keep(i, values[i]);
}

template <bool fp16>
__global__ void round_in_place_kernel(float* values, size_t n) {
  FOR_EACH_ELEMENT(i, n) values[i] = low16_widen<fp16>(low16_round<fp16>(values[i]));
}

// values [begin, end) rounded into the 16-bit slots [begin, end) of the same memory, which lie in
// the floats [begin/2, end/2): read before this launch when end ≤ 2·begin (narrow_in_place).
template <bool fp16>
__global__ void narrow_kernel(float* values, size_t begin, size_t end) {
  low16* slots = reinterpret_cast<low16*>(values);
  FOR_EACH_ELEMENT(k, end - begin) slots[begin + k] = low16_round<fp16>(values[begin + k]);
}

}  // namespace

void to_low(Context& ctx, Precision precision, low16* out, const float* in, size_t n) {
  if (n == 0) return;
  with_type(precision, [&](auto fp16) {
    round_kernel<decltype(fp16)::value><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, in, n);
  });
  check_launch("to_low");
}

void store_low(Context& ctx, Precision precision, low16* kept, float* values, size_t n) {
  if (n == 0) return;
  with_type(precision, [&](auto fp16) {
    store_kernel<decltype(fp16)::value><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(kept, values, n);
  });
  check_launch("store_low");
}

void round_low(Context& ctx, Precision precision, float* values, size_t n) {
  if (n == 0) return;
  with_type(precision, [&](auto fp16) {
    round_in_place_kernel<decltype(fp16)::value><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(values, n);
  });
  check_launch("round_low");
}

// In launches of doubling ranges [L, 2L), [2L, 4L), ...: each writes only floats an earlier
// launch (ordered on the stream) has read. The first L values go through a stream-ordered
// scratch copy, since their slots overlap themselves.
low16* narrow_in_place(Context& ctx, Precision precision, float* values, size_t n) {
  constexpr size_t kFirst = size_t(1) << 16;
  const size_t first = n < kFirst ? n : kFirst;
  cudaStream_t stream = stream_of(ctx);
  if (first > 0) {
    low16* head = nullptr;
    check(cudaMallocAsync(reinterpret_cast<void**>(&head), first * sizeof(low16), stream), "cudaMallocAsync (narrow)");
    to_low(ctx, precision, head, values, first);
    check(cudaMemcpyAsync(values, head, first * sizeof(low16), cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync (narrow)");
    check(cudaFreeAsync(head, stream), "cudaFreeAsync (narrow)");
  }
  for (size_t begin = first; begin < n; begin *= 2) {
    const size_t end = 2 * begin < n ? 2 * begin : n;
    with_type(precision, [&](auto fp16) {
      narrow_kernel<decltype(fp16)::value><<<blocks_for(end - begin), kThreads, 0, stream>>>(values, begin, end);
    });
    check_launch("narrow");
  }
  return reinterpret_cast<low16*>(values);
}

void from_low(Context& ctx, Precision precision, float* out, const low16* in, size_t n) {
  if (n == 0) return;
  with_type(precision, [&](auto fp16) {
    widen_kernel<decltype(fp16)::value><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, in, n);
  });
  check_launch("from_low");
}

namespace {
const Low16Ops kLow16{"cuda", &cuda::copy, &to_low, &from_low, &store_low, &round_low, &narrow_in_place};
}

void convert(Context& ctx, const Tensor& out, const Tensor& in) { typed_low16::convert(kLow16, ctx, out, in); }
void store(Context& ctx, const Tensor& kept, const Tensor& values) { typed_low16::store(kLow16, ctx, kept, values); }
void round_to(Context& ctx, const Tensor& values, DType type) { typed_low16::round_to(kLow16, ctx, values, type); }
Tensor narrow(Context& ctx, const Tensor& values, DType type) { return typed_low16::narrow(kLow16, ctx, values, type); }

}  // namespace trident::kernels::cuda
