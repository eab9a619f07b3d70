// Element-wise kernels: GELU, residual adds, AdamW, and the deterministic sum of squares.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/onednn.hpp"
#include "kernels/common/elementwise.hpp"
#include "kernels/common/low16.hpp"
#include "kernels/common/math.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/portable.hpp"

namespace trident::kernels::cpu {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
constexpr size_t kSumChunk = 8192;                 // fixed chunks: same sum for any thread count
constexpr size_t kLanes = 16;                      // running sums per chunk (sum_of_squares)

}  // namespace

// oneDNN's eltwise gelu_tanh: 10% faster than ours (docs/PERFORMANCE.md); our backward is
// faster than oneDNN's and stays.
void gelu_forward(Context& ctx, float* out, const float* inp, size_t n) {
  if (ctx.arithmetic == Arithmetic::portable) return portable_gelu_forward(out, inp, n);
  using dnnl::memory;
  static std::map<size_t, std::pair<memory::desc, dnnl::eltwise_forward>> cache;
  static std::mutex mutex;
  std::unique_lock<std::mutex> lock(mutex);
  auto found = cache.find(n);
  const auto failure = [n](const char* what, const dnnl::error& e) {
    return onednn_failure(std::string(what) + " the f32 GELU (eltwise_gelu_tanh) forward of " + std::to_string(n) + " values", e);
  };
  if (found == cache.end()) {
    try {
      const memory::desc md({static_cast<memory::dim>(n)}, memory::data_type::f32, memory::format_tag::a);
      dnnl::eltwise_forward primitive(dnnl::eltwise_forward::primitive_desc(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::eltwise_gelu_tanh, md, 0.f, 0.f),
          cpu_engine()));
      found = cache.emplace(n, std::make_pair(md, primitive)).first;
    } catch (const dnnl::error& e) {
      throw failure("create", e);
    }
  }
  const auto& [md, primitive] = found->second;
  lock.unlock();
  try {
    primitive.execute(cpu_stream(), {{DNNL_ARG_SRC, memory(md, cpu_engine(), const_cast<float*>(inp))},
                                     {DNNL_ARG_DST, memory(md, cpu_engine(), out)}});
    cpu_stream().wait();
  } catch (const dnnl::error& e) {
    throw failure("run", e);
  }
}

namespace {

// dout · GELU'(x): d/dx [x σ(2u)] = σ(2u) + 2x σ(2u)(1 − σ(2u)) u'   (σ(2u) = (1 + tanh u)/2)
inline float gelu_gradient_of(float x, float dout) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  const float s = 1.0f / (1.0f + vexp(-2.0f * u));
  const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
  return dout * (s + 2.0f * x * s * (1.0f - s) * du);
}

constexpr size_t kWidenChunk = 2048;  // gelu_backward_low16's widened inputs, per thread

}  // namespace

void gelu_backward(Context&, float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) dinp[i] = gelu_gradient_of(inp[i], dout[i]);
}

// Chunk by chunk, each chunk's inputs widened (exact) into the thread's buffer first: the bits
// of the f32 kernel on an f32 copy, and dinp may be dout itself (linear_gelu_backward, in place).
void gelu_backward_low16(Context&, Precision precision, float* dinp, const low16* inp, const float* dout,
                         size_t n) {
  const bool fp16 = precision == Precision::fp16;
#pragma omp parallel for schedule(static)
  for (size_t first = 0; first < n; first += kWidenChunk) {
    const size_t m = std::min(kWidenChunk, n - first);
    float x[kWidenChunk];
    for (size_t i = 0; i < m; ++i) x[i] = fp16 ? fp16_widen(inp[first + i]) : bf16_widen(inp[first + i]);
#pragma omp simd
    for (size_t i = 0; i < m; ++i) dinp[first + i] = gelu_gradient_of(x[i], dout[first + i]);
  }
}

// The kept copy in a second pass, store's own (the same bits as the sums kept apart).
void residual_forward(Context& ctx, float* out, const float* a, const float* b, size_t n, Precision precision,
                      low16* kept) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  if (kept != nullptr) store_low(ctx, precision, kept, out, n);
}

void bias_residual_forward(Context& ctx, float* out, const float* residual, const float* x, const float* bias, int M,
                           int N, Precision precision, low16* kept) {
#pragma omp parallel for schedule(static)
  for (int m = 0; m < M; ++m) {
    const size_t row = static_cast<size_t>(m) * N;
#pragma omp simd
    for (int n = 0; n < N; ++n) out[row + n] = residual[row + n] + (x[row + n] + bias[n]);
  }
  if (kept != nullptr) store_low(ctx, precision, kept, out, static_cast<size_t>(M) * N);
}

void add_inplace(Context&, float* acc, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

void copy_columns(Context&, float* dst, int dst_width, int dst_first, const float* src, int src_width, int src_first,
                  int rows, int width, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* to = dst + static_cast<size_t>(r) * dst_width + dst_first;
    const float* from = src + static_cast<size_t>(r) * src_width + src_first;
    if (accumulate)
      for (int c = 0; c < width; ++c) to[c] += from[c];
    else
      std::copy(from, from + width, to);
  }
}

void copy_columns_low16(Context&, low16* dst, int dst_width, int dst_first, const low16* src, int src_width,
                        int src_first, int rows, int width) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const low16* from = src + static_cast<size_t>(r) * src_width + src_first;
    std::copy(from, from + width, dst + static_cast<size_t>(r) * dst_width + dst_first);
  }
}

namespace {

// The AdamW loop; Low: none (no 16-bit copy), or the copy's type, each a loop of its own so that
// the plain one stays as it was vectorized.
enum class LowCopy { none, bf16, fp16 };
template <LowCopy Low>
void adamw_loop(float* params, uint16_t* params_low, const float* grads, float* m, float* v, size_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, int64_t t, float grad_scale) {
  const float correction1 = 1.0f - std::pow(beta1, static_cast<float>(t));
  const float correction2 = 1.0f - std::pow(beta2, static_cast<float>(t));
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    const float m_i = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i / correction1;
    const float v_hat = v_i / correction2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
    if constexpr (Low == LowCopy::bf16) params_low[i] = bf16_round(params[i]);
    if constexpr (Low == LowCopy::fp16) params_low[i] = fp16_round(params[i]);
  }
}

}  // namespace

// Segment by segment (a parallel loop each: the same bits as one call per tensor).
void adamw_update(Context&, float* params, uint16_t* params_low, DType low_type, const float* grads, float* m,
                  float* v, const AdamWSegment* segments, size_t k, float lr, float beta1, float beta2, float eps,
                  float weight_decay, int64_t t, float grad_scale, const double* control) {
  if (control != nullptr) {  // the step's decisions, made in (host-addressable) memory by step_control
    if (control[1] != 0.0) return;
    grad_scale = static_cast<float>(control[0]);
  }
  const auto loop = params_low == nullptr        ? &adamw_loop<LowCopy::none>
                    : low_type == DType::bf16 ? &adamw_loop<LowCopy::bf16>
                                              : &adamw_loop<LowCopy::fp16>;
  for (size_t i = 0; i < k; ++i) {
    const int64_t b = segments[i].begin;
    loop(params + b, params_low != nullptr ? params_low + b : nullptr, grads + b, m + b, v + b,
         static_cast<size_t>(segments[i].count), lr, beta1, beta2, eps, segments[i].decay ? weight_decay : 0.0f, t,
         grad_scale);
  }
}

// The chunks of all parts in one parallel loop (part p's chunks from first[p]), then each part's
// chunk sums added in order.
void sums_of_squares(Context&, double* sums, const float* const* parts, const size_t* counts, size_t k) {
  std::vector<size_t> first(k + 1, 0);
  for (size_t p = 0; p < k; ++p) first[p + 1] = first[p] + (counts[p] + kSumChunk - 1) / kSumChunk;
  std::vector<double> partial(first[k], 0.0);
#pragma omp parallel for schedule(static)
  for (size_t global = 0; global < first[k]; ++global) {
    const size_t p = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), global) - first.begin()) - 1;
    const float* x = parts[p];
    const size_t chunk = global - first[p], end = std::min(counts[p], (chunk + 1) * kSumChunk);
    // kLanes running sums, element i into lane i mod kLanes, then the lanes in order: a fixed
    // order (the same sum for any thread count and any vector width), and one vector FMA per
    // kLanes elements instead of one dependent add per element (3x faster on the norm).
    double lane[kLanes] = {};
    size_t i = chunk * kSumChunk;
    for (; i + kLanes <= end; i += kLanes) {
#pragma omp simd
      for (size_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(x[i + l]) * x[i + l];
    }
    double sum = 0.0;
    for (; i < end; ++i) sum += static_cast<double>(x[i]) * x[i];
    for (double l : lane) sum += l;
    partial[global] = sum;
  }
  for (size_t p = 0; p < k; ++p) {
    sums[p] = 0.0;
    for (size_t chunk = first[p]; chunk < first[p + 1]; ++chunk) sums[p] += partial[chunk];
  }
}

void sums_of_squares_into(Context& ctx, double* out, size_t groups, const float* const* parts, const size_t* counts,
                          const int* group, size_t k) {
  std::vector<double> sums(k);
  sums_of_squares(ctx, sums.data(), parts, counts, k);
  std::fill(out, out + groups, 0.0);
  for (size_t p = 0; p < k; ++p) out[group[p]] += sums[p];
}

void mean_losses_into(Context&, double* out, const double* sums, size_t m, double tokens) {
  *out = mean_loss_sum(sums, m, tokens);
}

void step_control(Context&, double* scalars, float clip, double gradient_scale, double loss_divisor) {
  step_decisions(scalars, clip, gradient_scale, loss_divisor);
}

}  // namespace trident::kernels::cpu
