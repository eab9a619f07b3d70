// GEMMs through oneDNN's matmul primitive (no hand-written GEMM), with primitives cached per
// shape/layout so that a training step creates none after the first (and prepare_* creates
// them before it). 16-bit operands go to oneDNN's bf16 matmul, or are widened exactly to f32 in
// a workspace and multiplied in f32 (Context::low16_gemm).
#include "kernels/cpu/matmul.hpp"

#include <dnnl.hpp>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "kernels/common/extents.hpp"
#include "kernels/cpu/column_sums.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/portable.hpp"
#include "kernels/cpu/workspace.hpp"
#include "tensor/buffer.hpp"

namespace trident::kernels::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dims = memory::dims;

struct CachedMatmul {
  dnnl::matmul primitive;
  memory::desc a, b, bias, c;
};

std::atomic<int64_t> g_created{0};

memory::data_type dnnl_type(OperandType type) {
  switch (type) {
    case OperandType::bf16: return memory::data_type::bf16;
    case OperandType::f16: return memory::data_type::f16;
    default: return memory::data_type::f32;
  }
}

std::string strides_text(const Strides& s) {
  return "{" + std::to_string(s.batch) + "," + std::to_string(s.head) + "," + std::to_string(s.row) +
         "," + std::to_string(s.col) + "}";
}

memory::desc strided_desc(int batch, int heads, int rows, int cols, const Strides& s, memory::data_type type) {
  return memory::desc({batch, heads, rows, cols}, type, dims{s.batch, s.head, s.row, s.col});
}

// What to do about a GEMM oneDNN refuses: a 16-bit one has the widened path on every CPU.
std::string hint(const Gemm& g) {
  return g.operands == OperandType::f32
             ? "; this is a fault of the build or the library: report it with the output of `trident version`"
             : "; kernels.low16_gemm = widened (or auto) multiplies 16-bit operands in f32 on any CPU";
}

[[noreturn]] void fail(const char* what, const Gemm& g, const dnnl::error& e) {
  throw onednn_failure(std::string(what) + " the " + describe(g), e, hint(g));
}

CachedMatmul create(const Gemm& g) {
  CachedMatmul entry;
  const memory::data_type operands = dnnl_type(g.operands);
  entry.a = strided_desc(g.batch, g.heads, g.M, g.K, g.a, operands);
  entry.b = strided_desc(g.batch, g.heads, g.K, g.N, g.b, operands);
  entry.c = strided_desc(g.batch, g.heads, g.M, g.N, g.c, memory::data_type::f32);
  if (g.bias) entry.bias = memory::desc({1, 1, 1, g.N}, memory::data_type::f32, tag::abcd);
  dnnl::primitive_attr attr;
  if (g.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc = g.bias ? dnnl::matmul::desc(entry.a, entry.b, entry.bias, entry.c)
                                         : dnnl::matmul::desc(entry.a, entry.b, entry.c);
  entry.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, cpu_engine()));
  return entry;
}

// One primitive per shape, layout, accumulation, bias and operand type.
const CachedMatmul& get_matmul(const Gemm& g) {
  static std::unordered_map<std::string, CachedMatmul> cache;
  static std::mutex mutex;
  const std::string key = std::to_string(g.batch) + "," + std::to_string(g.heads) + "," + std::to_string(g.M) +
                          "," + std::to_string(g.N) + "," + std::to_string(g.K) + "," + strides_text(g.a) +
                          strides_text(g.b) + strides_text(g.c) + char('0' + g.accumulate) +
                          char('0' + g.bias) + operand_type_name(g.operands);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  try {
    CachedMatmul entry = create(g);
    ++g_created;
    return cache.emplace(key, std::move(entry)).first->second;
  } catch (const dnnl::error& e) {
    fail("create", g, e);
  }
}

bool empty(const Gemm& g) { return g.M == 0 || g.N == 0 || g.batch == 0 || g.heads == 0; }

}  // namespace

void prepare_gemm(const Context& ctx, const Gemm& g) {
  if (!empty(g) && ctx.arithmetic == Arithmetic::native) get_matmul(g);
}

void run_gemm(const Context& ctx, const Gemm& g, float* c, const void* a, const void* b, const float* bias) {
  if (empty(g)) return;
  if (ctx.arithmetic == Arithmetic::portable) return portable_gemm(g, c, a, b, bias);
  const CachedMatmul& mm = get_matmul(g);
  dnnl::engine& engine = cpu_engine();
  try {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(mm.a, engine, const_cast<void*>(a))},
                                         {DNNL_ARG_WEIGHTS, memory(mm.b, engine, const_cast<void*>(b))},
                                         {DNNL_ARG_DST, memory(mm.c, engine, c)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(mm.bias, engine, const_cast<float*>(bias)));
    mm.primitive.execute(cpu_stream(), args);
    cpu_stream().wait();
  } catch (const dnnl::error& e) {
    fail("run", g, e);
  }
}

OperandType operand_type(const Context& ctx, Precision precision) {
  if (precision == Precision::fp32 || widens_low16(ctx, precision)) return OperandType::f32;  // never portable
  return precision == Precision::bf16 ? OperandType::bf16 : OperandType::f16;
}

float* widening_workspace(size_t floats) {
  static Buffer<float> workspace;
  return at_least(workspace, floats);
}

Tensor rounding_workspace(int64_t rows, int64_t cols) {
  static Buffer<float> workspace;
  const size_t n = static_cast<size_t>(rows * cols);
  return Tensor{at_least(workspace, n), DType::f32, Shape{rows, cols}, Device{}};
}

int64_t primitives_created() { return g_created; }

void strided_matmul(Context& ctx, float* c, const Strides& c_strides, const float* a, const Strides& a_strides,
                    const float* b, const Strides& b_strides, int batch, int heads, int M, int N, int K,
                    bool accumulate) {
  run_gemm(ctx, {batch, heads, M, N, K, a_strides, b_strides, c_strides, accumulate, false, OperandType::f32}, c, a, b);
}

void batched_matmul(Context& ctx, float* c, const float* a, const float* b, int batch, int M, int N, int K,
                    bool transpose_a, bool transpose_b, bool accumulate) {
  cpu::strided_matmul(ctx, c, dense(M, N, false), a, dense(M, K, transpose_a), b, dense(K, N, transpose_b), batch, 1, M,
                 N, K, accumulate);
}

// Widened: each operand's whole extent (strides kept) widened into the workspace, then f32.
void strided_matmul_bf16(Context& ctx, float* c, const Strides& c_strides, const bf16* a, const Strides& a_strides,
                         const bf16* b, const Strides& b_strides, int batch, int heads, int M, int N, int K,
                         bool accumulate) {
  Gemm g{batch, heads, M, N, K, a_strides, b_strides, c_strides, accumulate, false, operand_type(ctx, Precision::bf16)};
  if (g.operands != OperandType::f32 || empty(g)) return run_gemm(ctx, g, c, a, b);
  const size_t na = static_cast<size_t>(strided_extent(batch, heads, M, K, a_strides));
  const size_t nb = static_cast<size_t>(strided_extent(batch, heads, K, N, b_strides));
  float* a32 = widening_workspace(na + nb);  // a's extent, then b's
  from_bf16(ctx, a32, a, na);
  from_bf16(ctx, a32 + na, b, nb);
  run_gemm(ctx, g, c, a32, a32 + na);
}

void batched_matmul_bf16(Context& ctx, float* c, const bf16* a, const bf16* b, int batch, int M, int N, int K,
                         bool transpose_a, bool transpose_b, bool accumulate) {
  cpu::strided_matmul_bf16(ctx, c, dense(M, N, false), a, dense(M, K, transpose_a), b, dense(K, N, transpose_b), batch,
                      1, M, N, K, accumulate);
}

namespace {

void backward_gemms(const Context& ctx, float* dx, float* dw, const void* dy, const void* x, const void* w, int M, int K, int N,
                    OperandType type) {
  if (dx) run_gemm(ctx, linear_input_gradient_gemm(M, K, N, type), dx, dy, w);
  if (dw) run_gemm(ctx, linear_weight_gradient_gemm(M, K, N, type), dw, dy, x);
}

void require_same_type(const Tensor& x, const Tensor& w) {
  if (x.dtype != w.dtype)
    throw std::logic_error(std::string("linear layer on operands of two types: ") + dtype_name(x.dtype) + " and " +
                           dtype_name(w.dtype));
}

}  // namespace

void linear_forward(Context& ctx, float* y, const float* x, const float* w, const float* bias, int M, int K, int N) {
  run_gemm(ctx, linear_forward_gemm(M, K, N, bias != nullptr, OperandType::f32), y, x, w, bias);
}

void linear_backward(Context& ctx, float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                     int M, int K, int N) {
  backward_gemms(ctx, dx, dw, dy, x, w, M, K, N, OperandType::f32);
  if (dbias) column_sums_add(dbias, dy, M, N);
}

void bias_gradient(Context&, float* dbias, const float* dy, int M, int N) { column_sums_add(dbias, dy, M, N); }

void linear_forward_low(Context& ctx, Precision precision, float* y, const low16* x, const low16* w,
                        const float* bias, int M, int K, int N) {
  const Gemm g = linear_forward_gemm(M, K, N, bias != nullptr, operand_type(ctx, precision));
  if (g.operands != OperandType::f32) return run_gemm(ctx, g, y, x, w, bias);
  const size_t MK = size_t(M) * K, NK = size_t(N) * K;
  float* x32 = widening_workspace(MK + NK);  // x (M, K), then w (N, K)
  from_low(ctx, precision, x32, x, MK);
  from_low(ctx, precision, x32 + MK, w, NK);
  run_gemm(ctx, g, y, x32, x32 + MK, bias);
}

void linear_backward_low(Context& ctx, Precision precision, float* dx, float* dw, float* dbias, const float* dy,
                         const low16* dy_low, const low16* x, const low16* w, int M, int K, int N) {
  const OperandType type = operand_type(ctx, precision);
  if (type != OperandType::f32) {
    backward_gemms(ctx, dx, dw, dy_low, x, w, M, K, N, type);
  } else {
    const size_t MN = size_t(M) * N, MK = size_t(M) * K, NK = size_t(N) * K;
    float* dy32 = widening_workspace(MN + MK + NK);  // dy (M, N), x (M, K), w (N, K)
    from_low(ctx, precision, dy32, dy_low, MN);
    if (dw) from_low(ctx, precision, dy32 + MN, x, MK);  // read by the weight gradient alone
    from_low(ctx, precision, dy32 + MN + MK, w, NK);
    backward_gemms(ctx, dx, dw, dy32, dy32 + MN, dy32 + MN + MK, M, K, N, type);
  }
  if (dbias) column_sums_add(dbias, dy, M, N);
}

// The typed linear layer: the f32 GEMMs, or the 16-bit ones of x's type. M, K from x (M, K), N
// from w (N, K).
// A 16-bit y: the GEMM into the rounding workspace, then rounded into y.
void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias) {
  const int M = static_cast<int>(matrix_rows(x)), K = static_cast<int>(matrix_cols(x));
  const int N = static_cast<int>(matrix_rows(w));
  const float* b = optional_data<float>(bias);
  if (x.dtype == DType::f32) return cpu::linear_forward(ctx, y.as<float>(), x.as<float>(), w.as<float>(), b, M, K, N);
  require_same_type(x, w);
  const Tensor f32 = y.dtype == DType::f32 ? y : rounding_workspace(M, N);
  cpu::linear_forward_low(ctx, precision_of(x.dtype), f32.as<float>(), x.as<low16>(), w.as<low16>(), b, M, K, N);
  if (y.dtype != DType::f32) cpu::convert(ctx, y, f32);
}

// The GEMM's f32 sums (pre itself in f32, else the rounding workspace), then what the layer's
// parts did apart: pre kept in its type (the sums rounded with it, kernels::store), act = the
// GELU of those values, kept likewise.
void linear_gelu_forward(Context& ctx, const Tensor& pre, const Tensor& act, const Tensor& x, const Tensor& w,
                         const Tensor& bias) {
  if (pre.dtype == DType::f32) {
    cpu::linear_forward(ctx, pre, x, w, bias);
    return cpu::gelu_forward(ctx, act, pre);
  }
  const Tensor sums = rounding_workspace(matrix_rows(x), matrix_rows(w));
  cpu::linear_forward(ctx, sums, x, w, bias);
  cpu::store(ctx, pre, sums);
  cpu::gelu_forward(ctx, sums, sums);
  cpu::store(ctx, act, sums);
}

// The GEMM of linear_backward's dx into its f32 sums (dpre itself in f32, else the rounding
// workspace), GELU' in place (gelu_backward's arithmetic), the bias gradient summed from those
// f32 values (linear_backward's), and a 16-bit dpre: them rounded to its type (linear_backward's
// narrowing).
void linear_gelu_backward(Context& ctx, const Tensor& dpre, const Tensor& dbias, const Tensor& dy, const Tensor& pre,
                          const Tensor& w) {
  const int M = static_cast<int>(matrix_rows(pre)), K = static_cast<int>(matrix_cols(pre));
  const int N = static_cast<int>(matrix_rows(w));
  float* db = optional_data<float>(dbias);
  const bool low = pre.dtype != DType::f32;
  const Tensor sums = low ? rounding_workspace(M, K) : dpre;
  if (low)
    cpu::linear_backward_low(ctx, precision_of(pre.dtype), sums.as<float>(), nullptr, nullptr, nullptr,
                             dy.as<low16>(), nullptr, w.as<low16>(), M, K, N);
  else
    cpu::linear_backward(ctx, sums.as<float>(), nullptr, nullptr, dy.as<float>(), nullptr, w.as<float>(), M, K, N);
  cpu::gelu_backward(ctx, sums, pre, sums);  // in place
  if (db) column_sums_add(db, sums.as<float>(), M, K);
  if (low) to_low(ctx, precision_of(pre.dtype), dpre.as<low16>(), sums.as<float>(), static_cast<size_t>(M) * K);
}

void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dbias, const Tensor& dy,
                     const Tensor& dy_low, const Tensor& x, const Tensor& w) {
  const int M = static_cast<int>(matrix_rows(x)), K = static_cast<int>(matrix_cols(x));
  const int N = static_cast<int>(matrix_rows(w));
  float* dx_data = optional_data<float>(dx);
  float* dw_data = optional_data<float>(dw);
  float* db = optional_data<float>(dbias);
  const float* dy_data = optional_data<float>(dy);
  if (x.dtype == DType::f32)
    return cpu::linear_backward(ctx, dx_data, dw_data, db, dy_data, x.as<float>(), w.as<float>(), M, K, N);
  require_same_type(x, w);
  const Precision precision = precision_of(x.dtype);
  if (dy_data != nullptr && dy_low.data != dy.data)
    to_low(ctx, precision, dy_low.as<low16>(), dy_data, static_cast<size_t>(M) * N);
  else if (db != nullptr)
    throw std::logic_error("linear_backward: a bias gradient needs the f32 output gradient, not one narrowed in place");
  cpu::linear_backward_low(ctx, precision, dx_data, dw_data, db, dy_data, dy_low.as<low16>(), x.as<low16>(),
                           w.as<low16>(), M, K, N);
}

void prepare_linear(Context& ctx, Precision precision, int M, int K, int N, bool bias) {
  const OperandType type = operand_type(ctx, precision);
  prepare_gemm(ctx, linear_forward_gemm(M, K, N, bias, type));
  prepare_gemm(ctx, linear_input_gradient_gemm(M, K, N, type));
  prepare_gemm(ctx, linear_weight_gradient_gemm(M, K, N, type));
}

}  // namespace trident::kernels::cpu
