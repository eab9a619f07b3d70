// GEMMs through oneDNN's matmul primitive (no hand-written GEMM), with primitives cached per
// shape/layout so that a training step creates none after the first.
#include <dnnl.hpp>

#include <mutex>
#include <type_traits>
#include <string>
#include <unordered_map>

#include "kernels/cpu/column_sums.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/kernels.hpp"
#include "tensor/buffer.hpp"

namespace trident::kernels {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dims = memory::dims;

memory::desc strided_desc(int batch, int heads, int rows, int cols, const Strides& s,
                          memory::data_type type = memory::data_type::f32) {
  return memory::desc({batch, heads, rows, cols}, type, dims{s.batch, s.head, s.row, s.col});
}

struct CachedMatmul {
  dnnl::matmul primitive;
  memory::desc a, b, bias, c;
};

std::string strides_key(const Strides& s) {
  return std::to_string(s.batch) + ":" + std::to_string(s.head) + ":" + std::to_string(s.row) +
         ":" + std::to_string(s.col);
}

// One primitive per shape, layout, accumulation, bias and operand type (f32, or bf16 a and b
// with an f32 result: oneDNN accumulates in f32 and, with AVX512-BF16, multiplies in bf16).
const CachedMatmul& get_matmul(int batch, int heads, int M, int N, int K, const Strides& as,
                               const Strides& bs, const Strides& cs, bool accumulate,
                               bool with_bias, bool bf16 = false) {
  static std::unordered_map<std::string, CachedMatmul> cache;
  static std::mutex mutex;
  const std::string key = std::to_string(batch) + "," + std::to_string(heads) + "," +
                          std::to_string(M) + "," + std::to_string(N) + "," + std::to_string(K) +
                          "," + strides_key(as) + "," + strides_key(bs) + "," + strides_key(cs) +
                          char('0' + accumulate) + char('0' + with_bias) + char('0' + bf16);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  CachedMatmul entry;
  const memory::data_type operands = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  entry.a = strided_desc(batch, heads, M, K, as, operands);
  entry.b = strided_desc(batch, heads, K, N, bs, operands);
  entry.c = strided_desc(batch, heads, M, N, cs);
  if (with_bias) entry.bias = memory::desc({1, 1, 1, N}, memory::data_type::f32, tag::abcd);
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc = with_bias ? dnnl::matmul::desc(entry.a, entry.b, entry.bias, entry.c)
                                            : dnnl::matmul::desc(entry.a, entry.b, entry.c);
  entry.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, cpu_engine()));
  return cache.emplace(key, std::move(entry)).first->second;
}

// a and b are f32, or bf16 when `bf16` is set; c and bias are f32.
void run_matmul(float* c, const Strides& cs, const void* a, const Strides& as, const void* b,
                const Strides& bs, const float* bias, int batch, int heads, int M, int N, int K,
                bool accumulate, bool bf16 = false) {
  if (M == 0 || N == 0 || batch == 0 || heads == 0) return;
  const CachedMatmul& mm = get_matmul(batch, heads, M, N, K, as, bs, cs, accumulate, bias != nullptr, bf16);
  dnnl::engine& engine = cpu_engine();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(mm.a, engine, const_cast<void*>(a))},
      {DNNL_ARG_WEIGHTS, memory(mm.b, engine, const_cast<void*>(b))},
      {DNNL_ARG_DST, memory(mm.c, engine, c)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(mm.bias, engine, const_cast<float*>(bias)));
  mm.primitive.execute(cpu_stream(), args);
  cpu_stream().wait();
}

// A dense (rows, cols) matrix, or one stored transposed, per batch entry.
Strides dense(int64_t rows, int64_t cols, bool stored_transposed) {
  return stored_transposed ? Strides{rows * cols, rows * cols, 1, rows}
                           : Strides{rows * cols, rows * cols, cols, 1};
}

}  // namespace

void batched_matmul_bf16(Context&, float* c, const bf16* a, const bf16* b, int batch, int M, int N, int K,
                         bool transpose_a, bool transpose_b, bool accumulate) {
  run_matmul(c, dense(M, N, false), a, dense(M, K, transpose_a), b, dense(K, N, transpose_b),
             nullptr, batch, 1, M, N, K, accumulate, true);
}

void strided_matmul_bf16(Context&, float* c, const Strides& c_strides, const bf16* a,
                         const Strides& a_strides, const bf16* b, const Strides& b_strides,
                         int batch, int heads, int M, int N, int K, bool accumulate) {
  run_matmul(c, c_strides, a, a_strides, b, b_strides, nullptr, batch, heads, M, N, K, accumulate, true);
}

void strided_matmul(Context&, float* c, const Strides& c_strides, const float* a,
                    const Strides& a_strides, const float* b, const Strides& b_strides, int batch,
                    int heads, int M, int N, int K, bool accumulate) {
  run_matmul(c, c_strides, a, a_strides, b, b_strides, nullptr, batch, heads, M, N, K, accumulate);
}

void batched_matmul(Context&, float* c, const float* a, const float* b, int batch, int M, int N,
                    int K, bool transpose_a, bool transpose_b, bool accumulate) {
  run_matmul(c, dense(M, N, false), a, dense(M, K, transpose_a), b, dense(K, N, transpose_b),
             nullptr, batch, 1, M, N, K, accumulate);
}

namespace {

// The linear layer's GEMMs on f32 or bf16 operands (T float or bf16), f32 results.
template <class T>
void linear_forward_gemm(float* y, const T* x, const T* w, const float* bias, int M, int K, int N) {
  // wᵀ as the (K, N) operand: w is stored (N, K), i.e. the operand stored transposed.
  run_matmul(y, dense(M, N, false), x, dense(M, K, false), w, dense(K, N, true), bias, 1, 1, M, N,
             K, false, !std::is_same_v<T, float>);
}

template <class T>
void linear_backward_gemms(float* dx, float* dw, const T* dy, const T* x, const T* w, int M, int K, int N) {
  const bool bf16 = !std::is_same_v<T, float>;
  if (dx)  // (M, N) · (N, K)
    run_matmul(dx, dense(M, K, false), dy, dense(M, N, false), w, dense(N, K, false), nullptr, 1,
               1, M, K, N, false, bf16);
  // (N, M) · (M, K): dyᵀ read from dy stored (M, N)
  run_matmul(dw, dense(N, K, false), dy, dense(N, M, true), x, dense(M, K, false), nullptr, 1, 1,
             N, K, M, true, bf16);
}

// fp16 operands widened to f32 (exact): a workspace that grows to the largest GEMM's operands
// and is kept (tracked as Workspace), so that a step allocates nothing after the first.
float* fp16_workspace(size_t floats) {
  static Buffer<float> workspace;
  if (workspace.size() < floats) {
    workspace = Buffer<float>();  // freed first: the peak is the largest need, not two
    workspace = Buffer<float>(floats, MemoryCategory::Workspace);
  }
  return workspace.data();
}

}  // namespace

void linear_forward(Context&, float* y, const float* x, const float* w, const float* bias, int M,
                    int K, int N) {
  linear_forward_gemm(y, x, w, bias, M, K, N);
}

void linear_backward(Context&, float* dx, float* dw, float* dbias, const float* dy,
                     const float* x, const float* w, int M, int K, int N) {
  linear_backward_gemms(dx, dw, dy, x, w, M, K, N);
  if (dbias) column_sums_add(dbias, dy, M, N);
}

void linear_forward_low(Context& ctx, Precision precision, float* y, const low16* x,
                        const low16* w, const float* bias, int M, int K, int N) {
  if (precision == Precision::bf16) return linear_forward_gemm(y, x, w, bias, M, K, N);
  const size_t MK = size_t(M) * K, NK = size_t(N) * K;
  float* x32 = fp16_workspace(MK + NK);  // (M, K) then w (N, K)
  from_fp16(ctx, x32, x, MK);
  from_fp16(ctx, x32 + MK, w, NK);
  linear_forward_gemm(y, x32, x32 + MK, bias, M, K, N);
}

void linear_backward_low(Context& ctx, Precision precision, float* dx, float* dw, float* dbias,
                         const float* dy, const low16* dy_low, const low16* x, const low16* w,
                         int M, int K, int N) {
  if (precision == Precision::bf16) {
    linear_backward_gemms(dx, dw, dy_low, x, w, M, K, N);
  } else {
    const size_t MN = size_t(M) * N, MK = size_t(M) * K, NK = size_t(N) * K;
    float* dy32 = fp16_workspace(MN + MK + NK);  // dy (M, N), x (M, K), w (N, K)
    from_fp16(ctx, dy32, dy_low, MN);
    from_fp16(ctx, dy32 + MN, x, MK);
    from_fp16(ctx, dy32 + MN + MK, w, NK);
    linear_backward_gemms(dx, dw, dy32, dy32 + MN, dy32 + MN + MK, M, K, N);
  }
  if (dbias) column_sums_add(dbias, dy, M, N);
}

}  // namespace trident::kernels
