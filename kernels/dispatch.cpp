// The public operations of kernels/kernels.hpp: each checks its tensors against kernels/ops.inc
// (dtypes and extents, read off the shapes as extents.hpp does for the backends) and goes to the
// entry of the Context's backend (kernels/backend.hpp). A mismatch, and a backend without that
// entry, are programming errors here (a backend is selectable only with every entry; tests may
// still call a partial one).
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/backend.hpp"
#include "kernels/op_times.hpp"
#include "kernels/common/extents.hpp"

namespace trident::kernels {
namespace {

// An operation's call, timed into ctx.op_times where the context has one (kernels/op_times.hpp):
// the backend's marks on both sides of it.
template <class F>
struct Call;
template <class R, class... Rest>
struct Call<R (*)(Context&, Rest...)> {
  R (*f)(Context&, Rest...);
  const char* name;
  R operator()(Context& ctx, Rest... rest) const {
    if (ctx.op_times == nullptr) return f(ctx, rest...);
    // Recorded after a call that returned, not from a destructor: a call that threw (a device
    // fault) is reported as itself, not as the failing mark after it (std::terminate).
    Backend& backend = backend_of(ctx);
    const Backend::Mark from = backend.mark(ctx.stream);
    if constexpr (std::is_void_v<R>) {
      f(ctx, rest...);
      ctx.op_times->record(name, backend, from, backend.mark(ctx.stream));
    } else {
      R result = f(ctx, rest...);
      ctx.op_times->record(name, backend, from, backend.mark(ctx.stream));
      return result;
    }
  }
};

template <class F>
Call<F> entry(const Context& ctx, F KernelTable::*op, const char* name) {
  const Backend& backend = backend_of(ctx);
  const F f = backend.kernels().*op;
  if (f == nullptr)
    throw std::logic_error(std::string("the ") + backend.name() + " kernel backend has no " + name);
  return {f, name};
}

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (int d = 0; d < shape.rank; ++d) text += (d ? ", " : "") + std::to_string(shape.dims[d]);
  return text + ")";
}

// The checks of one call's arguments against ops.inc, named by the operation: comparisons only,
// the message built on the error path alone (these run on every kernel call).
class Arguments {
 public:
  explicit Arguments(const char* op) : op_(op) {}

  void type(const char* name, const Tensor& t, DType dtype) const {
    if (t.dtype != dtype) fail(name, "is " + type_text(t) + ", not " + dtype_name(dtype));
  }
  // A GEMM operand: f32 or a 16-bit storage type.
  void operand(const char* name, const Tensor& t) const {
    if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::fp16)
      fail(name, "is " + type_text(t) + ", not a GEMM operand (f32, bf16 or fp16)");
  }
  // Of dtype, with n elements; at_least: n or more (a scratch, a strided operand's memory).
  void exactly(const char* name, const Tensor& t, DType dtype, int64_t n) const {
    type(name, t, dtype);
    if (t.shape.numel() != n) fail(name, elements(t) + ", not " + std::to_string(n));
  }
  void at_least(const char* name, const Tensor& t, DType dtype, int64_t n) const {
    type(name, t, dtype);
    if (t.shape.numel() < n) fail(name, elements(t) + ", fewer than " + std::to_string(n));
  }
  void f32(const char* name, const Tensor& t, int64_t n) const { exactly(name, t, DType::f32, n); }
  // An output the kernel writes in its own type: f32 or 16-bit, with n elements.
  void typed(const char* name, const Tensor& t, int64_t n) const {
    operand(name, t);
    exactly(name, t, t.dtype, n);
  }
  void optional_f32(const char* name, const Tensor& t, int64_t n) const {
    if (t.data != nullptr) f32(name, t, n);
  }
  // t as a matrix has `cols` columns (its last dimension).
  void columns(const char* name, const Tensor& t, int64_t cols) const {
    if (matrix_cols(t) != cols)
      fail(name, "is " + shape_text(t.shape) + ": " + std::to_string(matrix_cols(t)) + " columns, not " +
                     std::to_string(cols));
  }
  void rank(const char* name, const Tensor& t, int rank) const {
    if (t.shape.rank != rank) fail(name, "is " + shape_text(t.shape) + ", not of rank " + std::to_string(rank));
  }
  // t of dtype as (batch, rows, cols) matrices (kernels/common/extents.hpp's matrix_batch).
  void matrices(const char* name, const Tensor& t, DType dtype, int64_t batch, int64_t rows, int64_t cols) const {
    type(name, t, dtype);
    const MatrixBatch m = matrix_batch(t);
    if (t.shape.rank < 2 || m.batch != batch || m.rows != rows || m.cols != cols)
      fail(name, "is " + shape_text(t.shape) + ", not " + std::to_string(batch) + " × (" + std::to_string(rows) +
                     ", " + std::to_string(cols) + ")");
  }
  void holds(bool condition, const char* name, const char* what) const {
    if (!condition) fail(name, what);
  }
  // valid of the ld columns of logits are real tokens.
  void valid_columns(int valid, int64_t ld) const {
    if (valid < 0 || valid > ld)
      fail("valid", "is " + std::to_string(valid) + ", not within the " + std::to_string(ld) + " columns of logits");
  }

 private:
  static std::string elements(const Tensor& t) {
    const std::string shape = t.shape.rank > 1 ? " " + shape_text(t.shape) : "";
    return "has " + std::to_string(t.shape.numel()) + " elements" + shape;
  }
  // Its dtype, or that it is an empty Tensor (a required buffer left out).
  static std::string type_text(const Tensor& t) {
    return t.data == nullptr && t.shape.rank == 0 ? "an empty Tensor" : dtype_name(t.dtype);
  }
  [[noreturn]] void fail(const char* name, const std::string& what) const {
    throw std::logic_error(std::string("kernels::") + op_ + ": " + name + " " + what);
  }
  const char* op_;
};

// The operands of a strided GEMM: each holds its strided view.
void check_strided(const Arguments& args, DType operands, const Tensor& c, const Strides& c_strides,
                   const Tensor& a, const Strides& a_strides, const Tensor& b, const Strides& b_strides, int batch,
                   int heads, int M, int N, int K) {
  args.at_least("c", c, DType::f32, strided_extent(batch, heads, M, N, c_strides));
  args.at_least("a", a, operands, strided_extent(batch, heads, M, K, a_strides));
  args.at_least("b", b, operands, strided_extent(batch, heads, K, N, b_strides));
}

// The operands of a batched GEMM: c (batch, M, N) says batch, M and N, a says K.
void check_batched(const Arguments& args, DType operands, const Tensor& c, const Tensor& a, const Tensor& b,
                   bool transpose_a, bool transpose_b) {
  const BatchedSizes s = batched_sizes(c, a, transpose_a);
  args.matrices("c", c, DType::f32, s.batch, s.M, s.N);
  args.matrices("a", a, operands, s.batch, transpose_a ? s.K : s.M, transpose_a ? s.M : s.K);
  args.matrices("b", b, operands, s.batch, transpose_b ? s.N : s.K, transpose_b ? s.K : s.N);
}

// The linear layer's operands: x (M, K), w (N, K), of one GEMM operand type.
void check_linear_operands(const Arguments& args, const Tensor& x, const Tensor& w) {
  args.operand("x", x);
  args.type("w", w, x.dtype);
  args.columns("w", w, matrix_cols(x));
}

// Attention's input qkv (B, T, 3C) of `operands` and its output or the output's gradient
// (B, T, C): what both attentions check first. Returns (B, T, C).
Sequence check_sequence(const Arguments& args, const char* qkv_name, const Tensor& qkv, DType operands,
                        const char* out_name, const Tensor& out, DType out_type = DType::f32) {
  args.type(qkv_name, qkv, operands);
  args.rank(qkv_name, qkv, 3);
  args.holds(qkv.shape.dims[2] % 3 == 0, qkv_name, "has a last dimension that is not 3C");
  const Sequence s = attention_sequence(qkv);
  args.exactly(out_name, out, out_type, int64_t(s.B) * s.T * s.C);
  return s;
}

// The materialized attention over NH heads: qkv and out as above, the probabilities att
// (B, NH, T, T).
void check_attention(const Arguments& args, const char* qkv_name, const Tensor& qkv, DType operands,
                     const char* out_name, const Tensor& out, const Tensor& att, int NH) {
  const Sequence s = check_sequence(args, qkv_name, qkv, operands, out_name, out);
  args.f32("att", att, int64_t(s.B) * NH * s.T * s.T);
}

// The flash attention over NH query and KV key/value heads: out (B, T, C) f32 or of qkv's type,
// qkv (B, T, (NH + 2·KV)·hs) f32 or 16-bit (the values as kept), hs = C / NH, the row statistics
// lse (B, NH, T). Returns (B, T, C).
Sequence check_flash(const Arguments& args, const Tensor& qkv, const Tensor& out, const Tensor& lse, int NH, int KV) {
  args.operand("qkv", qkv);
  args.rank("qkv", qkv, 3);
  args.rank("out", out, 3);
  args.type("out", out, out.dtype == DType::f32 ? DType::f32 : qkv.dtype);
  const Sequence s = sequence(out);
  args.holds(NH > 0 && KV > 0 && NH % KV == 0 && s.C % NH == 0, "NH",
             "and KV are not head counts of out's C channels: NH a multiple of KV, C of NH");
  const int64_t width = s.C + 2 * int64_t(KV) * (s.C / NH);
  args.holds(qkv.shape.dims[0] == s.B && qkv.shape.dims[1] == s.T && qkv.shape.dims[2] == width, "qkv",
             "is not (B, T, (NH + 2·KV)·hs) of out's B, T and hs = C / NH");
  args.f32("lse", lse, int64_t(s.B) * NH * s.T);
  return s;
}

// Element-wise operations: every tensor f32, of as many elements as the first.
struct Named {
  const char* name;
  const Tensor& tensor;
};
void check_elementwise(const Arguments& args, std::initializer_list<Named> tensors) {
  const int64_t n = tensors.begin()->tensor.shape.numel();
  for (const Named& t : tensors) args.f32(t.name, t.tensor, n);
}

// LayerNorm's input inp (N, C), its parameters weight and bias (C), its statistics mean and
// variance (N).
// typed_input: inp may be 16-bit (backward, from a 16-bit model's kept input), else f32.
void check_layernorm(const Arguments& args, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                     const Tensor& mean, const Tensor& variance, bool typed_input = false) {
  const int64_t N = matrix_rows(inp), C = matrix_cols(inp);
  if (typed_input) args.operand("inp", inp);
  else args.type("inp", inp, DType::f32);
  args.f32("weight", weight, C);
  args.f32("bias", bias, C);
  args.f32("mean", mean, N);
  args.f32("variance", variance, N);
}

// The embedding's tokens (i32), its table (rows, C) and the (B, T, C) activation of the tokens.
void check_embedding(const Arguments& args, const Tensor& tokens, const char* table_name, const Tensor& table,
                     const char* activation_name, const Tensor& activation) {
  args.type("tokens", tokens, DType::i32);
  args.f32(activation_name, activation, tokens.shape.numel() * matrix_cols(table));
}

// The positions' activation (B, T, C), of rank 3, and their table (T, C).
void check_positions(const Arguments& args, const char* activation_name, const Tensor& activation,
                     const char* table_name, const Tensor& table) {
  args.type(activation_name, activation, DType::f32);
  args.rank(activation_name, activation, 3);
  const Sequence s = sequence(activation);
  args.f32(table_name, table, int64_t(s.T) * s.C);
}

}  // namespace

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    default: return "fp32";
  }
}

void clear(Context& ctx, const Tensor& t) {
  entry(ctx, &KernelTable::clear, "clear")(ctx, t);
}

void copy(Context& ctx, const Tensor& dst, const Tensor& src) {
  entry(ctx, &KernelTable::copy, "copy")(ctx, dst, src);
}

void upload(Context& ctx, const Tensor& dst, const void* host) {
  entry(ctx, &KernelTable::upload, "upload")(ctx, dst, host);
}

void download(Context& ctx, void* host, const Tensor& src) {
  entry(ctx, &KernelTable::download, "download")(ctx, host, src);
}

void stage_download(Context& ctx, void* host, const Tensor& src) {
  entry(ctx, &KernelTable::stage_download, "stage_download")(ctx, host, src);
}

double sum(Context& ctx, const Tensor& values) {
  return entry(ctx, &KernelTable::sum, "sum")(ctx, values);
}

void sum_into(Context& ctx, const Tensor& out, const Tensor& values) {
  entry(ctx, &KernelTable::sum_into, "sum_into")(ctx, out, values);
}

void convert(Context& ctx, const Tensor& out, const Tensor& in) {
  entry(ctx, &KernelTable::convert, "convert")(ctx, out, in);
}

void store(Context& ctx, const Tensor& kept, const Tensor& values) {
  entry(ctx, &KernelTable::store, "store")(ctx, kept, values);
}

void round_to(Context& ctx, const Tensor& values, DType type) {
  entry(ctx, &KernelTable::round_to, "round_to")(ctx, values, type);
}

Tensor narrow(Context& ctx, const Tensor& values, DType type) {
  return entry(ctx, &KernelTable::narrow, "narrow")(ctx, values, type);
}

void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias) {
  const Arguments args("linear_forward");
  check_linear_operands(args, x, w);
  const int64_t M = matrix_rows(x), N = matrix_rows(w);
  args.typed("y", y, M * N);
  if (y.dtype != DType::f32) args.type("y", y, x.dtype);  // a kept activation, of the operands' 16-bit type
  args.optional_f32("bias", bias, N);
  entry(ctx, &KernelTable::linear_forward, "linear_forward")(ctx, y, x, w, bias);
}

void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dbias, const Tensor& dy,
                     const Tensor& dy_low, const Tensor& x, const Tensor& w) {
  const Arguments args("linear_backward");
  check_linear_operands(args, x, w);
  const int64_t M = matrix_rows(x), K = matrix_cols(x), N = matrix_rows(w);
  args.optional_f32("dx", dx, M * K);
  args.optional_f32("dw", dw, N * K);
  args.optional_f32("dbias", dbias, N);
  // dy may be absent only where its 16-bit values are given and nothing sums the f32 ones.
  if (x.dtype == DType::f32 || dbias.data != nullptr) args.f32("dy", dy, M * N);
  else args.optional_f32("dy", dy, M * N);
  if (x.dtype != DType::f32) args.at_least("dy_low", dy_low, x.dtype, M * N);
  entry(ctx, &KernelTable::linear_backward, "linear_backward")(ctx, dx, dw, dbias, dy, dy_low, x, w);
}

void bias_gradient(Context& ctx, const Tensor& dbias, const Tensor& dy) {
  const Arguments args("bias_gradient");
  args.type("dy", dy, DType::f32);
  args.f32("dbias", dbias, matrix_cols(dy));
  entry(ctx, &KernelTable::bias_gradient, "bias_gradient")(ctx, dbias, dy);
}

void linear_gelu_forward(Context& ctx, const Tensor& pre, const Tensor& act, const Tensor& x, const Tensor& w,
                         const Tensor& bias) {
  const Arguments args("linear_gelu_forward");
  check_linear_operands(args, x, w);
  const int64_t M = matrix_rows(x), N = matrix_rows(w);
  args.typed("pre", pre, M * N);
  args.exactly("act", act, pre.dtype, M * N);
  args.optional_f32("bias", bias, N);
  entry(ctx, &KernelTable::linear_gelu_forward, "linear_gelu_forward")(ctx, pre, act, x, w, bias);
}

void linear_gelu_backward(Context& ctx, const Tensor& dpre, const Tensor& dbias, const Tensor& dy, const Tensor& pre,
                          const Tensor& w) {
  const Arguments args("linear_gelu_backward");
  args.operand("pre", pre);
  args.type("w", w, pre.dtype);
  const int64_t M = matrix_rows(pre), K = matrix_cols(pre), N = matrix_rows(w);
  args.columns("w", w, K);
  args.exactly("dy", dy, pre.dtype, M * N);
  args.columns("dy", dy, N);
  args.exactly("dpre", dpre, pre.dtype, M * K);
  args.optional_f32("dbias", dbias, K);
  // The GEMM writes dpre's sums before GELU' has read pre.
  args.holds(dpre.data != pre.data, "dpre", "is pre's memory, which the GEMM would overwrite before GELU' reads it");
  entry(ctx, &KernelTable::linear_gelu_backward, "linear_gelu_backward")(ctx, dpre, dbias, dy, pre, w);
}

void strided_matmul(Context& ctx, const Tensor& c, const Strides& c_strides, const Tensor& a, const Strides& a_strides,
                    const Tensor& b, const Strides& b_strides, int batch, int heads, int M, int N, int K,
                    bool accumulate) {
  check_strided(Arguments("strided_matmul"), DType::f32, c, c_strides, a, a_strides, b, b_strides, batch, heads, M,
                N, K);
  entry(ctx, &KernelTable::strided_matmul, "strided_matmul")(ctx, c, c_strides, a, a_strides, b, b_strides, batch,
    heads, M, N, K, accumulate);
}

void batched_matmul(Context& ctx, const Tensor& c, const Tensor& a, const Tensor& b, bool transpose_a,
                    bool transpose_b, bool accumulate) {
  check_batched(Arguments("batched_matmul"), DType::f32, c, a, b, transpose_a, transpose_b);
  entry(ctx, &KernelTable::batched_matmul, "batched_matmul")(ctx, c, a, b, transpose_a, transpose_b, accumulate);
}

void batched_matmul_bf16(Context& ctx, const Tensor& c, const Tensor& a, const Tensor& b, bool transpose_a,
                         bool transpose_b, bool accumulate) {
  check_batched(Arguments("batched_matmul_bf16"), DType::bf16, c, a, b, transpose_a, transpose_b);
  entry(ctx, &KernelTable::batched_matmul_bf16, "batched_matmul_bf16")(ctx, c, a, b, transpose_a, transpose_b,
    accumulate);
}

void strided_matmul_bf16(Context& ctx, const Tensor& c, const Strides& c_strides, const Tensor& a,
                         const Strides& a_strides, const Tensor& b, const Strides& b_strides, int batch, int heads,
                         int M, int N, int K, bool accumulate) {
  check_strided(Arguments("strided_matmul_bf16"), DType::bf16, c, c_strides, a, a_strides, b, b_strides, batch,
                heads, M, N, K);
  entry(ctx, &KernelTable::strided_matmul_bf16, "strided_matmul_bf16")(ctx, c, c_strides, a, a_strides, b,
    b_strides, batch, heads, M, N, K, accumulate);
}

void prepare_linear(Context& ctx, Precision precision, int M, int K, int N, bool bias) {
  entry(ctx, &KernelTable::prepare_linear, "prepare_linear")(ctx, precision, M, K, N, bias);
}

void prepare_attention(Context& ctx, Precision precision, int B, int T, int C, int NH) {
  entry(ctx, &KernelTable::prepare_attention, "prepare_attention")(ctx, precision, B, T, C, NH);
}

void layernorm_forward(Context& ctx, const Tensor& out, const Tensor& mean, const Tensor& variance, const Tensor& inp,
                       const Tensor& weight, const Tensor& bias) {
  const Arguments args("layernorm_forward");
  check_layernorm(args, inp, weight, bias, mean, variance);
  args.typed("out", out, inp.shape.numel());
  entry(ctx, &KernelTable::layernorm_forward, "layernorm_forward")(ctx, out, mean, variance, inp, weight, bias);
}

// A gradient's 16-bit copy (or empty): bf16 or fp16 — of the type of the values `of` where they
// are 16-bit (a 16-bit model's kept input, its q, k, v) —, as many elements.
void check_gradient_copy(const Arguments& args, const char* name, const Tensor& copy, const Tensor& of) {
  if (copy.data == nullptr) return;
  args.holds(copy.dtype == DType::bf16 || copy.dtype == DType::fp16, name, "is not of a 16-bit type (bf16, fp16)");
  args.exactly(name, copy, of.dtype == DType::f32 ? copy.dtype : of.dtype, of.shape.numel());
}

void layernorm_backward(Context& ctx, const Tensor& dinp, const Tensor& dweight, const Tensor& dbias,
                        const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                        const Tensor& mean, const Tensor& variance, const Tensor& dinp_low) {
  const Arguments args("layernorm_backward");
  check_layernorm(args, inp, weight, bias, mean, variance, true);
  args.f32("dinp", dinp, inp.shape.numel());
  args.f32("dout", dout, inp.shape.numel());
  args.f32("dweight", dweight, weight.shape.numel());
  args.f32("dbias", dbias, weight.shape.numel());
  check_gradient_copy(args, "dinp_low", dinp_low, inp);
  entry(ctx, &KernelTable::layernorm_backward, "layernorm_backward")(ctx, dinp, dweight, dbias, dout, inp, weight,
    bias, mean, variance, dinp_low);
}

void gelu_forward(Context& ctx, const Tensor& out, const Tensor& inp) {
  check_elementwise(Arguments("gelu_forward"), {{"inp", inp}, {"out", out}});
  entry(ctx, &KernelTable::gelu_forward, "gelu_forward")(ctx, out, inp);
}

void gelu_backward(Context& ctx, const Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  const Arguments args("gelu_backward");
  args.operand("inp", inp);  // f32, or the 16-bit values kept
  check_elementwise(args, {{"dinp", dinp}, {"dout", dout}});
  args.exactly("inp", inp, inp.dtype, dinp.shape.numel());
  entry(ctx, &KernelTable::gelu_backward, "gelu_backward")(ctx, dinp, inp, dout);
}

// A residual connection's kept copy: none, or 16-bit of out's size.
void check_residual_kept(const Arguments& args, const Tensor& kept, int64_t n) {
  if (kept.data == nullptr) return;
  args.typed("kept", kept, n);
  args.holds(kept.dtype != DType::f32, "kept", "is f32: a kept copy is of a 16-bit storage type");
}

void residual_forward(Context& ctx, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& kept) {
  const Arguments args("residual_forward");
  check_elementwise(args, {{"out", out}, {"a", a}, {"b", b}});
  check_residual_kept(args, kept, out.numel());
  entry(ctx, &KernelTable::residual_forward, "residual_forward")(ctx, out, a, b, kept);
}

void bias_residual_forward(Context& ctx, const Tensor& out, const Tensor& residual, const Tensor& x,
                           const Tensor& bias, const Tensor& kept) {
  const Arguments args("bias_residual_forward");
  const int64_t M = matrix_rows(x), N = matrix_cols(x);
  args.type("x", x, DType::f32);
  args.f32("out", out, M * N);
  args.f32("residual", residual, M * N);
  args.f32("bias", bias, N);
  check_residual_kept(args, kept, M * N);
  entry(ctx, &KernelTable::bias_residual_forward, "bias_residual_forward")(ctx, out, residual, x, bias, kept);
}

void add_inplace(Context& ctx, const Tensor& acc, const Tensor& x) {
  check_elementwise(Arguments("add_inplace"), {{"acc", acc}, {"x", x}});
  entry(ctx, &KernelTable::add_inplace, "add_inplace")(ctx, acc, x);
}

void copy_columns(Context& ctx, const Tensor& dst, int dst_first, const Tensor& src, int src_first, int width,
                  bool accumulate) {
  const Arguments args("copy_columns");
  args.operand("src", src);  // f32, or 16-bit values copied as they are (not summed)
  args.type("dst", dst, src.dtype);
  args.holds(src.dtype == DType::f32 || !accumulate, "src", "is 16-bit: columns of 16-bit values are copied, not summed");
  args.holds(dst.shape.rank > 0 && src.shape.rank > 0, "src", "has no shape");
  const int64_t dst_width = dst.shape.dims[dst.shape.rank - 1], src_width = src.shape.dims[src.shape.rank - 1];
  args.holds(dst.shape.numel() / dst_width == src.shape.numel() / src_width, "dst", "has another number of rows than src");
  args.holds(width >= 0 && dst_first >= 0 && dst_first + width <= dst_width, "dst_first", "puts the columns outside dst");
  args.holds(src_first >= 0 && src_first + width <= src_width, "src_first", "takes columns outside src");
  entry(ctx, &KernelTable::copy_columns, "copy_columns")(ctx, dst, dst_first, src, src_first, width, accumulate);
}

void rmsnorm_forward(Context& ctx, const Tensor& out, const Tensor& rstd, const Tensor& inp, const Tensor& weight,
                     float eps) {
  const Arguments args("rmsnorm_forward");
  const int64_t N = matrix_rows(inp), C = matrix_cols(inp);
  args.f32("inp", inp, N * C);
  args.typed("out", out, N * C);
  args.f32("weight", weight, C);
  args.f32("rstd", rstd, N);
  args.holds(eps > 0, "eps", "is not positive");
  entry(ctx, &KernelTable::rmsnorm_forward, "rmsnorm_forward")(ctx, out, rstd, inp, weight, eps);
}

void rmsnorm_backward(Context& ctx, const Tensor& dinp, const Tensor& dweight, const Tensor& dout, const Tensor& inp,
                      const Tensor& weight, const Tensor& rstd, const Tensor& dinp_low) {
  const Arguments args("rmsnorm_backward");
  const int64_t N = matrix_rows(inp), C = matrix_cols(inp);
  args.typed("inp", inp, N * C);  // f32, or a 16-bit model's kept input
  args.f32("dinp", dinp, N * C);
  args.f32("dout", dout, N * C);
  args.f32("weight", weight, C);
  args.f32("dweight", dweight, C);
  args.f32("rstd", rstd, N);
  check_gradient_copy(args, "dinp_low", dinp_low, inp);
  entry(ctx, &KernelTable::rmsnorm_backward, "rmsnorm_backward")(ctx, dinp, dweight, dout, inp, weight, rstd,
                                                                 dinp_low);
}

void rope(Context& ctx, const Tensor& qkv, const Tensor& positions, int q_heads, int kv_heads, const RopeFrequencies& frequencies,
          bool inverse, const Tensor& copy) {
  const Arguments args("rope");
  args.type("qkv", qkv, DType::f32);
  args.rank("qkv", qkv, 3);
  const int64_t heads = int64_t(q_heads) + 2 * kv_heads, width = qkv.shape.dims[2];
  args.holds(q_heads > 0 && kv_heads > 0 && width % heads == 0 && (width / heads) % 2 == 0, "qkv",
             "is not (B, T, (q_heads + 2·kv_heads)·hs) with an even head size hs");
  args.exactly("positions", positions, DType::i32, qkv.shape.dims[1]);
  check_gradient_copy(args, "copy", copy, qkv);
  entry(ctx, &KernelTable::rope, "rope")(ctx, qkv, positions, q_heads, kv_heads, frequencies, inverse, copy);
}

void swiglu_forward(Context& ctx, const Tensor& out, const Tensor& inp) {
  const Arguments args("swiglu_forward");
  const int64_t N = matrix_rows(out), F = matrix_cols(out);
  args.f32("out", out, N * F);
  args.f32("inp", inp, N * 2 * F);
  entry(ctx, &KernelTable::swiglu_forward, "swiglu_forward")(ctx, out, inp);
}

void swiglu_backward(Context& ctx, const Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  const Arguments args("swiglu_backward");
  const int64_t N = matrix_rows(dout), F = matrix_cols(dout);
  args.f32("dout", dout, N * F);
  args.f32("inp", inp, N * 2 * F);
  args.f32("dinp", dinp, N * 2 * F);
  entry(ctx, &KernelTable::swiglu_backward, "swiglu_backward")(ctx, dinp, inp, dout);
}

namespace {

// The grouped-query layouts: compact (rows, (q + 2kv)·hs) and expanded (rows, 3q·hs), q a
// multiple of kv.
void check_kv(const Arguments& args, const char* compact_name, const Tensor& compact, const char* full_name,
              const Tensor& full, int q_heads, int kv_heads) {
  args.type(compact_name, compact, DType::f32);
  const int64_t rows = matrix_rows(compact), width = matrix_cols(compact), heads = int64_t(q_heads) + 2 * kv_heads;
  args.holds(q_heads > 0 && kv_heads > 0 && q_heads % kv_heads == 0 && width % heads == 0, compact_name,
             "is not (rows, (q_heads + 2·kv_heads)·hs) with q_heads a multiple of kv_heads");
  args.f32(full_name, full, rows * 3 * q_heads * (width / heads));
}

}  // namespace

void expand_kv(Context& ctx, const Tensor& out, const Tensor& qkv, int q_heads, int kv_heads) {
  check_kv(Arguments("expand_kv"), "qkv", qkv, "out", out, q_heads, kv_heads);
  entry(ctx, &KernelTable::expand_kv, "expand_kv")(ctx, out, qkv, q_heads, kv_heads);
}

void reduce_kv(Context& ctx, const Tensor& dqkv, const Tensor& dfull, int q_heads, int kv_heads) {
  check_kv(Arguments("reduce_kv"), "dqkv", dqkv, "dfull", dfull, q_heads, kv_heads);
  entry(ctx, &KernelTable::reduce_kv, "reduce_kv")(ctx, dqkv, dfull, q_heads, kv_heads);
}

void attention_forward(Context& ctx, const Tensor& out, const Tensor& att, const Tensor& qkv, int NH) {
  check_attention(Arguments("attention_forward"), "qkv", qkv, DType::f32, "out", out, att, NH);
  entry(ctx, &KernelTable::attention_forward, "attention_forward")(ctx, out, att, qkv, NH);
}

void attention_backward(Context& ctx, const Tensor& dqkv, const Tensor& datt, const Tensor& dout, const Tensor& qkv,
                        const Tensor& att, int NH) {
  const Arguments args("attention_backward");
  check_attention(args, "qkv", qkv, DType::f32, "dout", dout, att, NH);
  args.f32("dqkv", dqkv, qkv.shape.numel());
  args.f32("datt", datt, att.shape.numel());
  entry(ctx, &KernelTable::attention_backward, "attention_backward")(ctx, dqkv, datt, dout, qkv, att, NH);
}

void flash_attention_forward(Context& ctx, const Tensor& out, const Tensor& lse, const Tensor& qkv, int NH, int KV) {
  check_flash(Arguments("flash_attention_forward"), qkv, out, lse, NH, KV);
  entry(ctx, &KernelTable::flash_attention_forward, "flash_attention_forward")(ctx, out, lse, qkv, NH, KV);
}

void flash_attention_backward(Context& ctx, const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                              const Tensor& out, const Tensor& lse, int NH, int KV, const Tensor& dqkv_low) {
  const Arguments args("flash_attention_backward");
  check_flash(args, qkv, out, lse, NH, KV);
  args.f32("dout", dout, out.shape.numel());
  args.f32("dqkv", dqkv, qkv.shape.numel());
  check_gradient_copy(args, "dqkv_low", dqkv_low, qkv);
  args.holds(dqkv_low.data == nullptr || qkv.dtype != DType::f32, "dqkv_low",
             "is given for f32 q, k and v: the copy is of their 16-bit type");
  entry(ctx, &KernelTable::flash_attention_backward, "flash_attention_backward")(ctx, dqkv, dout, qkv, out, lse, NH,
                                                                                 KV, dqkv_low);
}

// A ring-attention block: qkv, out and lse as the flash attention's; kv (B, T, W ≥ 2·KV·hs);
// the chunks inside the T rows.
void check_block(const Arguments& args, const Tensor& qkv, const Tensor& kv, const Tensor& out, const Tensor& lse,
                 int NH, int KV, const AttentionBlock& block) {
  const Sequence s = check_flash(args, qkv, out, lse, NH, KV);
  args.type("kv", kv, qkv.dtype);
  args.rank("kv", kv, 3);
  args.holds(kv.shape.dims[0] == s.B && kv.shape.dims[1] == s.T && kv.shape.dims[2] >= qkv.shape.dims[2] - s.C, "kv",
             "is not (B, T, W >= 2·KV·hs) of the qkv's B and T");
  const int64_t chunks = block.rows > 0 ? s.T / block.rows : 0;
  args.holds(block.rows > 0 && block.q_chunk >= 0 && block.k_chunk >= 0 && block.q_chunk < chunks &&
                 block.k_chunk < chunks && (!block.causal || block.q_chunk == block.k_chunk),
             "block", "names chunks outside the T rows, or a causal block off the diagonal");
}

void flash_attention_block_forward(Context& ctx, const Tensor& out, const Tensor& lse, const Tensor& qkv,
                                   const Tensor& kv, int NH, int KV, const AttentionBlock& block) {
  const Arguments args("flash_attention_block_forward");
  check_block(args, qkv, kv, out, lse, NH, KV, block);
  args.type("out", out, DType::f32);  // the blocks fold into it
  entry(ctx, &KernelTable::flash_attention_block_forward, "flash_attention_block_forward")(ctx, out, lse, qkv, kv, NH,
                                                                                           KV, block);
}

void flash_attention_block_backward(Context& ctx, const Tensor& dqkv, const Tensor& dkv, const Tensor& dout,
                                    const Tensor& qkv, const Tensor& kv, const Tensor& out, const Tensor& lse, int NH,
                                    int KV, const AttentionBlock& block) {
  const Arguments args("flash_attention_block_backward");
  check_block(args, qkv, kv, out, lse, NH, KV, block);
  args.f32("dout", dout, out.shape.numel());
  args.f32("dqkv", dqkv, qkv.shape.numel());
  args.f32("dkv", dkv, kv.shape.numel());
  entry(ctx, &KernelTable::flash_attention_block_backward, "flash_attention_block_backward")(ctx, dqkv, dkv, dout, qkv,
                                                                                             kv, out, lse, NH, KV, block);
}

void attention_forward_bf16(Context& ctx, const Tensor& out, const Tensor& att, const Tensor& att_low,
                            const Tensor& qkv_low, int NH) {
  const Arguments args("attention_forward_bf16");
  check_attention(args, "qkv_low", qkv_low, DType::bf16, "out", out, att, NH);
  args.exactly("att_low", att_low, DType::bf16, att.shape.numel());
  entry(ctx, &KernelTable::attention_forward_bf16, "attention_forward_bf16")(ctx, out, att, att_low, qkv_low, NH);
}

void attention_backward_bf16(Context& ctx, const Tensor& dqkv, const Tensor& datt, const Tensor& dout,
                             const Tensor& dout_low, const Tensor& qkv_low, const Tensor& att, const Tensor& att_low,
                             int NH) {
  const Arguments args("attention_backward_bf16");
  check_attention(args, "qkv_low", qkv_low, DType::bf16, "dout", dout, att, NH);
  args.f32("dqkv", dqkv, qkv_low.shape.numel());
  args.f32("datt", datt, att.shape.numel());
  args.at_least("dout_low", dout_low, DType::bf16, dout.shape.numel());
  args.exactly("att_low", att_low, DType::bf16, att.shape.numel());
  entry(ctx, &KernelTable::attention_backward_bf16, "attention_backward_bf16")(ctx, dqkv, datt, dout, dout_low,
    qkv_low, att, att_low, NH);
}

void attention_decode(Context& ctx, const Tensor& out, const Tensor& scores, const Tensor& q, const Tensor& keys,
                      const Tensor& values, int NH) {
  const Arguments args("attention_decode");
  const int64_t C = q.shape.numel(), positions = matrix_rows(keys);
  args.type("q", q, DType::f32);
  args.f32("out", out, C);
  args.type("keys", keys, DType::f32);
  const int64_t W = matrix_cols(keys), hs = NH > 0 ? C / NH : 0;
  args.holds(NH > 0 && C % NH == 0 && hs > 0 && W % hs == 0 && W > 0 && NH % (W / hs) == 0, "keys",
             "is not (positions, KV·hs) for a KV dividing the NH query heads of q");
  args.f32("values", values, keys.shape.numel());
  args.f32("scores", scores, NH * positions);
  entry(ctx, &KernelTable::attention_decode, "attention_decode")(ctx, out, scores, q, keys, values, NH);
}

void embedding_forward(Context& ctx, const Tensor& out, const Tensor& tokens, const Tensor& wte, int vocab_begin) {
  const Arguments args("embedding_forward");
  check_embedding(args, tokens, "wte", wte, "out", out);
  args.operand("wte", wte);  // f32, or the 16-bit parameters of a bf16/fp16 model
  entry(ctx, &KernelTable::embedding_forward, "embedding_forward")(ctx, out, tokens, wte, vocab_begin);
}

void embedding_backward(Context& ctx, const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int vocab_begin) {
  const Arguments args("embedding_backward");
  check_embedding(args, tokens, "dwte", dwte, "dout", dout);
  args.type("dwte", dwte, DType::f32);
  entry(ctx, &KernelTable::embedding_backward, "embedding_backward")(ctx, dwte, dout, tokens, vocab_begin);
}

void positions_forward(Context& ctx, const Tensor& out, const Tensor& wpe) {
  check_positions(Arguments("positions_forward"), "out", out, "wpe", wpe);
  entry(ctx, &KernelTable::positions_forward, "positions_forward")(ctx, out, wpe);
}

void positions_backward(Context& ctx, const Tensor& dwpe, const Tensor& dout) {
  check_positions(Arguments("positions_backward"), "dout", dout, "dwpe", dwpe);
  entry(ctx, &KernelTable::positions_backward, "positions_backward")(ctx, dwpe, dout);
}

void crossentropy_row_max(Context& ctx, const Tensor& maxes, const Tensor& logits, int valid) {
  const Arguments args("crossentropy_row_max");
  args.type("logits", logits, DType::f32);
  args.valid_columns(valid, matrix_cols(logits));
  args.f32("maxes", maxes, matrix_rows(logits));
  entry(ctx, &KernelTable::crossentropy_row_max, "crossentropy_row_max")(ctx, maxes, logits, valid);
}

void crossentropy_row_sums(Context& ctx, const Tensor& sums, const Tensor& target_logits, const Tensor& logits,
                           const Tensor& maxes, const Tensor& targets, int vocab_begin, int valid) {
  const Arguments args("crossentropy_row_sums");
  const int64_t N = matrix_rows(logits);
  args.type("logits", logits, DType::f32);
  args.valid_columns(valid, matrix_cols(logits));
  args.f32("sums", sums, N);
  args.f32("target_logits", target_logits, N);
  args.f32("maxes", maxes, N);
  args.exactly("targets", targets, DType::i32, N);
  entry(ctx, &KernelTable::crossentropy_row_sums, "crossentropy_row_sums")(ctx, sums, target_logits, logits, maxes,
    targets, vocab_begin, valid);
}

void crossentropy_losses(Context& ctx, const Tensor& losses, const Tensor& log_normalizers, const Tensor& maxes,
                         const Tensor& sums, const Tensor& target_logits) {
  check_elementwise(Arguments("crossentropy_losses"), {{"maxes", maxes}, {"losses", losses},
                    {"log_normalizers", log_normalizers}, {"sums", sums}, {"target_logits", target_logits}});
  entry(ctx, &KernelTable::crossentropy_losses, "crossentropy_losses")(ctx, losses, log_normalizers, maxes, sums,
    target_logits);
}

namespace {

// What both operations that write dlogits check first: f32 logits (N, ld) with `valid` real
// columns, and dlogits of their size in f32 or 16 bits (a 16-bit model's GEMM operand, never in
// the logits' own memory).
void check_loss_gradient(const Arguments& args, const Tensor& dlogits, const Tensor& logits, int valid) {
  args.type("logits", logits, DType::f32);
  args.valid_columns(valid, matrix_cols(logits));
  args.typed("dlogits", dlogits, logits.shape.numel());
  args.holds(dlogits.dtype == DType::f32 || dlogits.data != logits.data, "dlogits",
             "is 16-bit in the logits' own memory: a 16-bit dlogits has a buffer of its own");
}

}  // namespace

void crossentropy_backward(Context& ctx, const Tensor& dlogits, const Tensor& logits, const Tensor& log_normalizers,
                           const Tensor& targets, int vocab_begin, float scale, int valid) {
  const Arguments args("crossentropy_backward");
  const int64_t N = matrix_rows(logits);
  check_loss_gradient(args, dlogits, logits, valid);
  args.f32("log_normalizers", log_normalizers, N);
  args.exactly("targets", targets, DType::i32, N);
  entry(ctx, &KernelTable::crossentropy_backward, "crossentropy_backward")(ctx, dlogits, logits, log_normalizers,
    targets, vocab_begin, scale, valid);
}

void crossentropy_forward_backward(Context& ctx, const Tensor& losses, const Tensor& log_normalizers,
                                   const Tensor& dlogits, const Tensor& logits, const Tensor& targets, float scale,
                                   int valid) {
  const Arguments args("crossentropy_forward_backward");
  const int64_t N = matrix_rows(logits);
  check_loss_gradient(args, dlogits, logits, valid);
  args.f32("losses", losses, N);
  args.f32("log_normalizers", log_normalizers, N);
  args.exactly("targets", targets, DType::i32, N);
  entry(ctx, &KernelTable::crossentropy_forward_backward, "crossentropy_forward_backward")(
    ctx, losses, log_normalizers, dlogits, logits, targets, scale, valid);
}

void adamw_update(Context& ctx, const Tensor& params, const Tensor& params_low, const Tensor& grads, const Tensor& m,
                  const Tensor& v, const std::vector<AdamWSegment>& segments, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int64_t t, float grad_scale, const Tensor& control) {
  const Arguments args("adamw_update");
  if (control.data != nullptr) args.exactly("control", control, DType::f64, 2);
  check_elementwise(args, {{"params", params}, {"grads", grads}, {"m", m}, {"v", v}});
  if (params_low.data != nullptr) {
    args.holds(params_low.dtype == DType::bf16 || params_low.dtype == DType::fp16, "params_low", "is not bf16 or fp16");
    args.exactly("params_low", params_low, params_low.dtype, params.shape.numel());
  }
  for (const AdamWSegment& s : segments)
    args.holds(s.begin >= 0 && s.count >= 0 && s.begin + s.count <= params.shape.numel(), "segments",
               "reach outside params");
  entry(ctx, &KernelTable::adamw_update, "adamw_update")(ctx, params, params_low, grads, m, v, segments, lr, beta1,
    beta2, eps, weight_decay, t, grad_scale, control);
}

std::vector<double> sums_of_squares(Context& ctx, const std::vector<Tensor>& parts) {
  const Arguments args("sums_of_squares");
  for (const Tensor& part : parts) args.type("parts", part, DType::f32);
  return entry(ctx, &KernelTable::sums_of_squares, "sums_of_squares")(ctx, parts);
}

void sums_of_squares_into(Context& ctx, const Tensor& out, const std::vector<Tensor>& parts,
                          const std::vector<int>& group) {
  const Arguments args("sums_of_squares_into");
  for (const Tensor& part : parts) args.type("parts", part, DType::f32);
  args.type("out", out, DType::f64);
  args.holds(group.size() == parts.size(), "group", "has not one entry per part");
  for (int g : group) args.holds(g >= 0 && g < int64_t(out.numel()), "group", "names a group out has no place for");
  entry(ctx, &KernelTable::sums_of_squares_into, "sums_of_squares_into")(ctx, out, parts, group);
}

void mean_losses_into(Context& ctx, const Tensor& out, const Tensor& sums, double tokens) {
  const Arguments args("mean_losses_into");
  args.exactly("out", out, DType::f64, 1);
  args.type("sums", sums, DType::f64);
  entry(ctx, &KernelTable::mean_losses_into, "mean_losses_into")(ctx, out, sums, tokens);
}

void step_control(Context& ctx, const Tensor& scalars, float clip, double gradient_scale, double loss_divisor) {
  const Arguments args("step_control");
  args.exactly("scalars", scalars, DType::f64, kStepScalars);
  entry(ctx, &KernelTable::step_control, "step_control")(ctx, scalars, clip, gradient_scale, loss_divisor);
}

}  // namespace trident::kernels
