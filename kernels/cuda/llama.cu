// Llama's parts on the GPU: RMSNorm (one thread block per row; the weight gradient as column sums
// in two deterministic passes, as LayerNorm's), rotary positions (a thread per rotated pair),
// SwiGLU and the grouped-query expansion (a thread per element). Each element by
// kernels/common/llama_math.hpp, the formulas the CPU kernels use. Outputs as the CPU's: out,
// rstd, dinp of SwiGLU and the kv layouts overwritten; RMSNorm's dinp and dweight accumulated.
#include "kernels/common/llama_math.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device.cuh"

namespace trident::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;

template <class Out>  // F32Out or Low16Out
__global__ void rmsnorm_forward_kernel(Out out, float* rstd, const float* inp, const float* weight, float eps, int C) {
  const size_t row = blockIdx.x;
  const float* x = inp + row * C;
  float squares = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) squares += x[c] * x[c];
  const float r = rmsnorm_rstd(block_sum(squares), C, eps);
  for (int c = threadIdx.x; c < C; c += blockDim.x) out(row * C + c, x[c] * r * weight[c]);
  if (threadIdx.x == 0) rstd[row] = r;
}

// In: the input's reader (f32, or 16-bit values widened as read).
template <class In, class Copy>
__global__ void rmsnorm_input_gradient_kernel(float* dinp, Copy copy, const float* dout, In inp, const float* weight,
                                              const float* rstd, int C) {
  const size_t row = blockIdx.x;
  const auto x = [&](int c) { return inp[row * C + c]; };
  const float* dy = dout + row * C;
  float dot = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) dot += weight[c] * dy[c] * x(c);
  dot = block_sum(dot);
  float* dx = dinp + row * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    dx[c] += rmsnorm_input_gradient(x(c), weight[c], dy[c], rstd[row], dot, C);
    copy(row * C + c, dx[c]);
  }
}

// partial[chunk, c] = Σ over the chunk's rows, in order, of dout · inp · rstd.
template <class In>
__global__ void rmsnorm_weight_chunks_kernel(float* partial, const float* dout, In inp, const float* rstd, int N,
                                             int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (c >= C) return;
  const int end = min(N, (chunk + 1) * kColumnChunk);
  float sum = 0.0f;
  for (int row = chunk * kColumnChunk; row < end; ++row) {
    const size_t at = static_cast<size_t>(row) * C + c;
    sum += dout[at] * inp[at] * rstd[row];
  }
  partial[static_cast<size_t>(chunk) * C + c] = sum;
}

// One thread per (row, head, pair i) of the first `heads` heads of each row: the rotated ones
// (the first `rotated`) turned, and each pair written to `copy` (NoCopy, or Low16Out: then
// heads counts v's too, copied as they are).
template <class Copy>
__global__ void rope_kernel(float* qkv, Copy copy, const int32_t* positions, int B, int T, int rotated, int heads,
                            int width, int head_size, RopeFrequencies frequencies, bool inverse) {
  const int half = head_size / 2;
  FOR_EACH_ELEMENT(e, static_cast<size_t>(B) * T * heads * half) {
    const int i = static_cast<int>(e % half), h = static_cast<int>(e / half % heads);
    const size_t row = e / half / heads, at = row * width + static_cast<size_t>(h) * head_size;
    float* head = qkv + at;
    if (h < rotated) {
      const int t = static_cast<int>(row % T);
      const float angle = static_cast<float>(positions[t]) * rope_inverse_frequency(i, head_size, frequencies);
      rope_rotate(head[i], head[half + i], cosf(angle), inverse ? -sinf(angle) : sinf(angle));
    }
    copy(at + i, head[i]);
    copy(at + half + i, head[half + i]);
  }
}

__global__ void swiglu_forward_kernel(float* out, const float* inp, int F, size_t n) {
  FOR_EACH_ELEMENT(e, n) {
    const size_t row = e / F, f = e % F;
    out[e] = swiglu_value(inp[row * 2 * F + f], inp[row * 2 * F + F + f]);
  }
}

__global__ void swiglu_backward_kernel(float* dinp, const float* inp, const float* dout, int F, size_t n) {
  FOR_EACH_ELEMENT(e, n) {
    const size_t row = e / F, f = e % F;
    swiglu_gradients(inp[row * 2 * F + f], inp[row * 2 * F + F + f], dout[e], dinp[row * 2 * F + f],
                     dinp[row * 2 * F + F + f]);
  }
}

// One thread per element of the expanded row (3·q·hs): a query copied, or a key/value of its kv head.
__global__ void expand_kv_kernel(float* out, const float* qkv, int q_heads, int kv_heads, int head_size, size_t n) {
  const int q = q_heads * head_size, kv = kv_heads * head_size, group = q_heads / kv_heads;
  FOR_EACH_ELEMENT(e, n) {
    const size_t row = e / (3 * q);
    const int j = static_cast<int>(e % (3 * q));
    const float* in = qkv + row * (q + 2 * kv);
    if (j < q) {
      out[e] = in[j];
    } else {
      const int part = j / q, within = j % q;  // part 1: keys, 2: values
      const int from = (within / head_size / group) * head_size + within % head_size;
      out[e] = in[q + (part - 1) * kv + from];
    }
  }
}

// One thread per element of the compact row: a query's gradient copied, or a kv head's summed
// over its group's query heads in order.
__global__ void reduce_kv_kernel(float* dqkv, const float* dfull, int q_heads, int kv_heads, int head_size, size_t n) {
  const int q = q_heads * head_size, kv = kv_heads * head_size, group = q_heads / kv_heads;
  FOR_EACH_ELEMENT(e, n) {
    const size_t row = e / (q + 2 * kv);
    const int j = static_cast<int>(e % (q + 2 * kv));
    const float* in = dfull + row * 3 * q;
    if (j < q) {
      dqkv[e] = in[j];
    } else {
      const int part = (j - q) / kv, within = (j - q) % kv;  // part 0: keys, 1: values
      const int k = within / head_size, d = within % head_size;
      float sum = 0.0f;
      for (int g = 0; g < group; ++g) sum += in[(1 + part) * q + (k * group + g) * head_size + d];
      dqkv[e] = sum;
    }
  }
}

}  // namespace

void rmsnorm_forward(Context& ctx, float* out, float* rstd, const float* inp, const float* weight, float eps, int N,
                     int C) {
  if (N == 0 || C == 0) return;
  rmsnorm_forward_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(F32Out{out}, rstd, inp, weight, eps, C);
  check_launch("rmsnorm_forward");
}

void rmsnorm_forward_low16(Context& ctx, Precision precision, low16* out, float* rstd, const float* inp,
                           const float* weight, float eps, int N, int C) {
  if (N == 0 || C == 0) return;
  with_type(precision, [&](auto fp16) {
    rmsnorm_forward_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(Low16Out<decltype(fp16)::value>{out}, rstd, inp,
                                                                    weight, eps, C);
  });
  check_launch("rmsnorm_forward");
}

namespace {

// inp f32 (precision fp32) or of precision's 16-bit type.
void rmsnorm_backward_of(Context& ctx, float* dinp, float* dweight, const float* dout, Precision precision,
                         const void* inp, const float* weight, const float* rstd, int N, int C, Precision copy_type,
                         low16* dinp_low) {
  if (N == 0 || C == 0) return;
  const int chunks = column_chunks(N);
  float* partial = stream_scratch(ctx, static_cast<size_t>(chunks) * C, "cudaMallocAsync (rmsnorm_backward)");
  with_input(precision, inp, [&](auto x) {
    with_copy(copy_type, dinp_low, [&](auto copy) {
      rmsnorm_input_gradient_kernel<<<N, kRowThreads, 0, stream_of(ctx)>>>(dinp, copy, dout, x, weight, rstd, C);
    });
    check_launch("rmsnorm_backward (input)");
    rmsnorm_weight_chunks_kernel<<<dim3(blocks_for(C), chunks), kThreads, 0, stream_of(ctx)>>>(partial, dout, x, rstd,
                                                                                              N, C);
    check_launch("rmsnorm_backward (weight)");
  });
  add_chunk_sums(ctx, dweight, partial, chunks, C);
  release_scratch(ctx, partial);
}

}  // namespace

void rmsnorm_backward(Context& ctx, float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C, Precision copy_type, low16* dinp_low) {
  rmsnorm_backward_of(ctx, dinp, dweight, dout, Precision::fp32, inp, weight, rstd, N, C, copy_type, dinp_low);
}

void rmsnorm_backward_low16(Context& ctx, Precision precision, float* dinp, float* dweight, const float* dout,
                            const low16* inp, const float* weight, const float* rstd, int N, int C, low16* dinp_low) {
  rmsnorm_backward_of(ctx, dinp, dweight, dout, precision, inp, weight, rstd, N, C, precision, dinp_low);
}

void rope(Context& ctx, float* qkv, const int32_t* positions, int B, int T, int q_heads, int kv_heads, int head_size,
          const RopeFrequencies& frequencies, bool inverse, Precision copy_type, low16* copy) {
  const int rotated = q_heads + kv_heads, heads = copy != nullptr ? q_heads + 2 * kv_heads : rotated;
  const size_t n = static_cast<size_t>(B) * T * heads * (head_size / 2);
  if (n == 0) return;
  with_copy(copy_type, copy, [&](auto out) {
    rope_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(qkv, out, positions, B, T, rotated, heads,
                                                                (q_heads + 2 * kv_heads) * head_size, head_size,
                                                                frequencies, inverse);
  });
  check_launch("rope");
}

void swiglu_forward(Context& ctx, float* out, const float* inp, int N, int F) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  swiglu_forward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, inp, F, n);
  check_launch("swiglu_forward");
}

void swiglu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, int N, int F) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  swiglu_backward_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dinp, inp, dout, F, n);
  check_launch("swiglu_backward");
}

void expand_kv(Context& ctx, float* out, const float* qkv, int rows, int q_heads, int kv_heads, int head_size) {
  const size_t n = static_cast<size_t>(rows) * 3 * q_heads * head_size;
  if (n == 0) return;
  expand_kv_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(out, qkv, q_heads, kv_heads, head_size, n);
  check_launch("expand_kv");
}

void reduce_kv(Context& ctx, float* dqkv, const float* dfull, int rows, int q_heads, int kv_heads, int head_size) {
  const size_t n = static_cast<size_t>(rows) * (q_heads + 2 * kv_heads) * head_size;
  if (n == 0) return;
  reduce_kv_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(dqkv, dfull, q_heads, kv_heads, head_size, n);
  check_launch("reduce_kv");
}

}  // namespace trident::kernels::cuda
