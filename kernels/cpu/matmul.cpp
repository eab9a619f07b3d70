// GEMMs through oneDNN's matmul primitive (no hand-written GEMM), with primitives cached per
// shape/layout so that a training step creates none after the first.
#include <dnnl.hpp>

#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/cpu/column_sums.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dims = memory::dims;

// A (rows, cols) matrix per batch entry, stored either as given or transposed in memory.
memory::desc matrix_desc(int batch, int rows, int cols, bool stored_transposed) {
  const memory::dim r = rows, c = cols, b = batch;
  if (!stored_transposed) return memory::desc({b, r, c}, memory::data_type::f32, dims{r * c, c, 1});
  return memory::desc({b, r, c}, memory::data_type::f32, dims{r * c, 1, r});
}

struct CachedMatmul {
  dnnl::matmul primitive;
  memory::desc a, b, bias, c;
};

// One primitive per (batch, M, N, K, transposes, accumulate, bias): small integers in a key.
const CachedMatmul& get_matmul(int batch, int M, int N, int K, bool ta, bool tb, bool accumulate,
                               bool with_bias) {
  static std::unordered_map<std::string, CachedMatmul> cache;
  static std::mutex mutex;
  const std::string key = std::to_string(batch) + "," + std::to_string(M) + "," +
                          std::to_string(N) + "," + std::to_string(K) + "," + char('0' + ta) +
                          char('0' + tb) + char('0' + accumulate) + char('0' + with_bias);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  CachedMatmul entry;
  entry.a = matrix_desc(batch, M, K, ta);
  entry.b = matrix_desc(batch, K, N, tb);
  entry.c = matrix_desc(batch, M, N, false);
  if (with_bias) entry.bias = memory::desc({1, 1, N}, memory::data_type::f32, tag::abc);
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

void run_matmul(float* c, const float* a, const float* b, const float* bias, int batch, int M,
                int N, int K, bool ta, bool tb, bool accumulate) {
  if (M == 0 || N == 0) return;
  const CachedMatmul& mm = get_matmul(batch, M, N, K, ta, tb, accumulate, bias != nullptr);
  dnnl::engine& engine = cpu_engine();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(mm.a, engine, const_cast<float*>(a))},
      {DNNL_ARG_WEIGHTS, memory(mm.b, engine, const_cast<float*>(b))},
      {DNNL_ARG_DST, memory(mm.c, engine, c)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(mm.bias, engine, const_cast<float*>(bias)));
  mm.primitive.execute(cpu_stream(), args);
  cpu_stream().wait();
}

}  // namespace

void batched_matmul(Context&, float* c, const float* a, const float* b, int batch, int M, int N,
                    int K, bool transpose_a, bool transpose_b, bool accumulate) {
  run_matmul(c, a, b, nullptr, batch, M, N, K, transpose_a, transpose_b, accumulate);
}

void linear_forward(Context&, float* y, const float* x, const float* w, const float* bias, int M,
                    int K, int N) {
  // wᵀ as the (K, N) operand: w is stored (N, K), i.e. the operand stored transposed.
  run_matmul(y, x, w, bias, 1, M, N, K, false, true, false);
}

void linear_backward(Context&, float* dx, float* dw, float* dbias, const float* dy,
                     const float* x, const float* w, int M, int K, int N) {
  if (dx) run_matmul(dx, dy, w, nullptr, 1, M, K, N, false, false, false);  // (M,N)·(N,K)
  run_matmul(dw, dy, x, nullptr, 1, N, K, M, true, false, true);             // (N,M)·(M,K)
  if (dbias) column_sums_add(dbias, dy, M, N);
}

}  // namespace trident::kernels
