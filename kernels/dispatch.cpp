// The public operations of kernels/kernels.hpp: each goes to the entry of the Context's backend
// (kernels/backend.hpp), and a backend without that entry is a programming error here (a
// backend is selectable only with every entry; tests may still call a partial one).
#include <stdexcept>
#include <string>

#include "kernels/backend.hpp"

namespace trident::kernels {
namespace {

template <class F>
F entry(const Context& ctx, F KernelTable::*op, const char* name) {
  const Backend& backend = backend_of(ctx);
  const F f = backend.kernels().*op;
  if (f == nullptr)
    throw std::logic_error(std::string("the ") + backend.name() + " kernel backend has no " + name);
  return f;
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

void linear_forward(Context& ctx, float* y, const Tensor& x, const Tensor& w, const float* bias, int M, int K,
                    int N) {
  entry(ctx, &KernelTable::linear_forward, "linear_forward")(ctx, y, x, w, bias, M, K, N);
}

void linear_backward(Context& ctx, float* dx, float* dw, float* dbias, const float* dy, const Tensor& dy_low,
                     const Tensor& x, const Tensor& w, int M, int K, int N) {
  entry(ctx, &KernelTable::linear_backward, "linear_backward")(ctx, dx, dw, dbias, dy, dy_low, x, w, M, K, N);
}

void strided_matmul(Context& ctx, float* c, const Strides& c_strides, const float* a, const Strides& a_strides,
                    const float* b, const Strides& b_strides, int batch, int heads, int M, int N, int K,
                    bool accumulate) {
  entry(ctx, &KernelTable::strided_matmul, "strided_matmul")(ctx, c, c_strides, a, a_strides, b, b_strides,
    batch, heads, M, N, K, accumulate);
}

void batched_matmul(Context& ctx, float* c, const float* a, const float* b, int batch, int M, int N, int K,
                    bool transpose_a, bool transpose_b, bool accumulate) {
  entry(ctx, &KernelTable::batched_matmul, "batched_matmul")(ctx, c, a, b, batch, M, N, K, transpose_a,
    transpose_b, accumulate);
}

void batched_matmul_bf16(Context& ctx, float* c, const bf16* a, const bf16* b, int batch, int M, int N, int K,
                         bool transpose_a, bool transpose_b, bool accumulate) {
  entry(ctx, &KernelTable::batched_matmul_bf16, "batched_matmul_bf16")(ctx, c, a, b, batch, M, N, K,
    transpose_a, transpose_b, accumulate);
}

void strided_matmul_bf16(Context& ctx, float* c, const Strides& c_strides, const bf16* a,
                         const Strides& a_strides, const bf16* b, const Strides& b_strides, int batch,
                         int heads, int M, int N, int K, bool accumulate) {
  entry(ctx, &KernelTable::strided_matmul_bf16, "strided_matmul_bf16")(ctx, c, c_strides, a, a_strides, b,
    b_strides, batch, heads, M, N, K, accumulate);
}

void prepare_linear(Context& ctx, Precision precision, int M, int K, int N, bool bias) {
  entry(ctx, &KernelTable::prepare_linear, "prepare_linear")(ctx, precision, M, K, N, bias);
}

void prepare_attention(Context& ctx, Precision precision, int B, int T, int C, int NH) {
  entry(ctx, &KernelTable::prepare_attention, "prepare_attention")(ctx, precision, B, T, C, NH);
}

void layernorm_forward(Context& ctx, float* out, float* mean, float* variance, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
  entry(ctx, &KernelTable::layernorm_forward, "layernorm_forward")(ctx, out, mean, variance, inp, weight, bias,
    N, C);
}

void layernorm_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* bias, const float* mean,
                        const float* variance, int N, int C) {
  entry(ctx, &KernelTable::layernorm_backward, "layernorm_backward")(ctx, dinp, dweight, dbias, dout, inp,
    weight, bias, mean, variance, N, C);
}

void gelu_forward(Context& ctx, float* out, const float* inp, size_t n) {
  entry(ctx, &KernelTable::gelu_forward, "gelu_forward")(ctx, out, inp, n);
}

void gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, size_t n) {
  entry(ctx, &KernelTable::gelu_backward, "gelu_backward")(ctx, dinp, inp, dout, n);
}

void residual_forward(Context& ctx, float* out, const float* a, const float* b, size_t n) {
  entry(ctx, &KernelTable::residual_forward, "residual_forward")(ctx, out, a, b, n);
}

void bias_residual_forward(Context& ctx, float* out, const float* residual, const float* x, const float* bias,
                           int M, int N) {
  entry(ctx, &KernelTable::bias_residual_forward, "bias_residual_forward")(ctx, out, residual, x, bias, M, N);
}

void add_inplace(Context& ctx, float* acc, const float* x, size_t n) {
  entry(ctx, &KernelTable::add_inplace, "add_inplace")(ctx, acc, x, n);
}

void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  entry(ctx, &KernelTable::attention_forward, "attention_forward")(ctx, out, att, qkv, B, T, C, NH);
}

void attention_decode(Context& ctx, float* out, float* scores, const float* q, const float* keys,
                      const float* values, int positions, int C, int NH) {
  entry(ctx, &KernelTable::attention_decode, "attention_decode")(ctx, out, scores, q, keys, values, positions, C, NH);
}

void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  entry(ctx, &KernelTable::attention_backward, "attention_backward")(ctx, dqkv, datt, dout, qkv, att, B, T, C,
    NH);
}

void attention_forward_bf16(Context& ctx, float* out, float* att, bf16* att_low, const bf16* qkv_low, int B,
                            int T, int C, int NH) {
  entry(ctx, &KernelTable::attention_forward_bf16, "attention_forward_bf16")(ctx, out, att, att_low, qkv_low, B,
    T, C, NH);
}

void attention_backward_bf16(Context& ctx, float* dqkv, float* datt, const float* dout, bf16* dout_low,
                             const bf16* qkv_low, const float* att, const bf16* att_low, int B, int T, int C,
                             int NH) {
  entry(ctx, &KernelTable::attention_backward_bf16, "attention_backward_bf16")(ctx, dqkv, datt, dout, dout_low,
    qkv_low, att, att_low, B, T, C, NH);
}

void embedding_forward(Context& ctx, float* out, const int32_t* tokens, const float* wte, int vocab_begin,
                       int rows, int B, int T, int C) {
  entry(ctx, &KernelTable::embedding_forward, "embedding_forward")(ctx, out, tokens, wte, vocab_begin, rows, B,
    T, C);
}

void embedding_backward(Context& ctx, float* dwte, const float* dout, const int32_t* tokens, int vocab_begin,
                        int rows, int B, int T, int C) {
  entry(ctx, &KernelTable::embedding_backward, "embedding_backward")(ctx, dwte, dout, tokens, vocab_begin, rows,
    B, T, C);
}

void positions_forward(Context& ctx, float* out, const float* wpe, int B, int T, int C) {
  entry(ctx, &KernelTable::positions_forward, "positions_forward")(ctx, out, wpe, B, T, C);
}

void positions_backward(Context& ctx, float* dwpe, const float* dout, int B, int T, int C) {
  entry(ctx, &KernelTable::positions_backward, "positions_backward")(ctx, dwpe, dout, B, T, C);
}

void crossentropy_row_max(Context& ctx, float* maxes, const float* logits, int N, int valid, int ld) {
  entry(ctx, &KernelTable::crossentropy_row_max, "crossentropy_row_max")(ctx, maxes, logits, N, valid, ld);
}

void crossentropy_row_sums(Context& ctx, float* sums, float* target_logits, const float* logits,
                           const float* maxes, const int32_t* targets, int vocab_begin, int N, int valid, int ld) {
  entry(ctx, &KernelTable::crossentropy_row_sums, "crossentropy_row_sums")(ctx, sums, target_logits, logits,
    maxes, targets, vocab_begin, N, valid, ld);
}

void crossentropy_losses(Context& ctx, float* losses, float* log_normalizers, const float* maxes,
                         const float* sums, const float* target_logits, int N) {
  entry(ctx, &KernelTable::crossentropy_losses, "crossentropy_losses")(ctx, losses, log_normalizers, maxes,
    sums, target_logits, N);
}

void crossentropy_backward(Context& ctx, float* dlogits, const float* logits, const float* log_normalizers,
                           const int32_t* targets, int vocab_begin, float scale, int N, int valid, int ld) {
  entry(ctx, &KernelTable::crossentropy_backward, "crossentropy_backward")(ctx, dlogits, logits,
    log_normalizers, targets, vocab_begin, scale, N, valid, ld);
}

void adamw_update(Context& ctx, float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t t, float grad_scale) {
  entry(ctx, &KernelTable::adamw_update, "adamw_update")(ctx, params, grads, m, v, n, lr, beta1, beta2, eps,
    weight_decay, t, grad_scale);
}

double sum_of_squares(Context& ctx, const float* x, size_t n) {
  return entry(ctx, &KernelTable::sum_of_squares, "sum_of_squares")(ctx, x, n);
}

}  // namespace trident::kernels
