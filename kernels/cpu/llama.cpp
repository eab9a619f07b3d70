// Llama's parts on the CPU: RMSNorm, rotary positions, SwiGLU and the grouped-query expansion,
// OpenMP over rows (or elements), each element by kernels/common/llama_math.hpp. Sums over a row
// run in index order, so the results do not depend on the thread count.
#include "kernels/common/llama_math.hpp"
#include "kernels/common/low16.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/workspace.hpp"

namespace trident::kernels::cpu {

namespace {

// Each row's rstd and its values out, put(i, value) writing element i of out in its type.
template <class Put>
void rmsnorm_rows(float* rstd, const float* inp, const float* weight, float eps, int N, int C, Put put) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + size_t(n) * C;
    float squares = 0.0f;
    for (int c = 0; c < C; ++c) squares += x[c] * x[c];
    const float r = rmsnorm_rstd(squares, C, eps);
    for (int c = 0; c < C; ++c) put(size_t(n) * C + c, x[c] * r * weight[c]);
    rstd[n] = r;
  }
}

}  // namespace

void rmsnorm_forward(Context&, float* out, float* rstd, const float* inp, const float* weight, float eps, int N,
                     int C) {
  rmsnorm_rows(rstd, inp, weight, eps, N, C, [out](size_t i, float value) { out[i] = value; });
}

void rmsnorm_forward_low16(Context&, Precision precision, low16* out, float* rstd, const float* inp,
                           const float* weight, float eps, int N, int C) {
  if (precision == Precision::fp16)
    return rmsnorm_rows(rstd, inp, weight, eps, N, C, [out](size_t i, float v) { out[i] = low16_round<true>(v); });
  rmsnorm_rows(rstd, inp, weight, eps, N, C, [out](size_t i, float v) { out[i] = low16_round<false>(v); });
}

void rmsnorm_backward(Context& ctx, float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C, Precision copy_type, low16* dinp_low) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + size_t(n) * C;
    const float* dy = dout + size_t(n) * C;
    float dot = 0.0f;
    for (int c = 0; c < C; ++c) dot += weight[c] * dy[c] * x[c];
    float* dx = dinp + size_t(n) * C;
    for (int c = 0; c < C; ++c) dx[c] += rmsnorm_input_gradient(x[c], weight[c], dy[c], rstd[n], dot, C);
  }
  if (dinp_low != nullptr) to_low(ctx, copy_type, dinp_low, dinp, static_cast<size_t>(N) * C);
  // dweight in row order per channel: one thread's channels each (deterministic).
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    float sum = 0.0f;
    for (int n = 0; n < N; ++n) sum += dout[size_t(n) * C + c] * inp[size_t(n) * C + c] * rstd[n];
    dweight[c] += sum;
  }
}

void rmsnorm_backward_low16(Context& ctx, Precision precision, float* dinp, float* dweight, const float* dout,
                            const low16* inp, const float* weight, const float* rstd, int N, int C, low16* dinp_low) {
  const float* x = widened_input(ctx, precision, inp, static_cast<size_t>(N) * C);
  cpu::rmsnorm_backward(ctx, dinp, dweight, dout, x, weight, rstd, N, C, precision, dinp_low);
}

void rope(Context& ctx, float* qkv, const int32_t* positions, int B, int T, int q_heads, int kv_heads, int head_size,
          const RopeFrequencies& frequencies, bool inverse, Precision copy_type, low16* copy) {
  const int half = head_size / 2, rotated = q_heads + kv_heads, width = (q_heads + 2 * kv_heads) * head_size;
  // The rows' (T, hs/2) cosines and sines, in a tracked workspace kept at the largest need.
  static Buffer<float> tables;
  float* cos_table = at_least(tables, size_t(T) * head_size);
  float* sin_table = cos_table + size_t(T) * half;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * rope_inverse_frequency(i, head_size, frequencies);
      cos_table[size_t(t) * half + i] = cosf(angle);
      sin_table[size_t(t) * half + i] = inverse ? -sinf(angle) : sinf(angle);
    }
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* row = qkv + (size_t(b) * T + t) * width;
      const float* c = cos_table + size_t(t) * half;
      const float* s = sin_table + size_t(t) * half;
      for (int h = 0; h < rotated; ++h)  // the query heads, then the key heads: contiguous
        for (int i = 0; i < half; ++i) rope_rotate(row[h * head_size + i], row[h * head_size + half + i], c[i], s[i]);
    }
  if (copy != nullptr) to_low(ctx, copy_type, copy, qkv, size_t(B) * T * width);
}

void swiglu_forward(Context&, float* out, const float* inp, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + size_t(n) * 2 * F;
    for (int f = 0; f < F; ++f) out[size_t(n) * F + f] = swiglu_value(gate[f], gate[F + f]);
  }
}

void swiglu_backward(Context&, float* dinp, const float* inp, const float* dout, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + size_t(n) * 2 * F;
    float* dgate = dinp + size_t(n) * 2 * F;
    for (int f = 0; f < F; ++f)
      swiglu_gradients(gate[f], gate[F + f], dout[size_t(n) * F + f], dgate[f], dgate[F + f]);
  }
}

// The query heads, then each its group's key and value head.
void expand_kv(Context&, float* out, const float* qkv, int rows, int q_heads, int kv_heads, int head_size) {
  const int group = q_heads / kv_heads, q = q_heads * head_size, kv = kv_heads * head_size;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* in = qkv + size_t(r) * (q + 2 * kv);
    float* o = out + size_t(r) * 3 * q;
    for (int j = 0; j < q; ++j) o[j] = in[j];
    for (int h = 0; h < q_heads; ++h)
      for (int d = 0; d < head_size; ++d) {
        const int from = (h / group) * head_size + d;
        o[q + h * head_size + d] = in[q + from];
        o[2 * q + h * head_size + d] = in[q + kv + from];
      }
  }
}

void reduce_kv(Context&, float* dqkv, const float* dfull, int rows, int q_heads, int kv_heads, int head_size) {
  const int group = q_heads / kv_heads, q = q_heads * head_size, kv = kv_heads * head_size;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* in = dfull + size_t(r) * 3 * q;
    float* o = dqkv + size_t(r) * (q + 2 * kv);
    for (int j = 0; j < q; ++j) o[j] = in[j];
    for (int k = 0; k < kv_heads; ++k)
      for (int d = 0; d < head_size; ++d) {
        float dk = 0.0f, dv = 0.0f;
        for (int g = 0; g < group; ++g) {  // the group's query heads in order
          dk += in[q + (k * group + g) * head_size + d];
          dv += in[2 * q + (k * group + g) * head_size + d];
        }
        o[q + k * head_size + d] = dk;
        o[q + kv + k * head_size + d] = dv;
      }
  }
}

}  // namespace trident::kernels::cpu
