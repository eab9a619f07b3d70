// The fused, chunked classifier (the math and communication are stated in the header).
#include "model/classifier.hpp"

#include <algorithm>

#include "kernels/backend.hpp"

namespace trident::model {
namespace {

// Rows [first, first + count) of a row-major (rows, width) operand, as (count, width).
Tensor rows(const Tensor& matrix, int first, int count, int width) {
  return matrix.elements(int64_t(first) * width, int64_t(count) * width).reshaped({count, width});
}

// The chunk's logits (n, Vp/p) = H_c wte_iᵀ, in the first n rows of the scratch.
Tensor chunk_logits(kernels::Context& ctx, const Tensor& logits_chunk, const Operand& hidden,
                    const Operand& wte_local, int first, int n, int C, int vocab_rows) {
  const Tensor logits = rows(logits_chunk, 0, n, vocab_rows);
  kernels::linear_forward(ctx, logits, rows(hidden, first, n, C), wte_local, Tensor{});
  return logits;
}

// dlogits: in place of the logits (f32), or in the operands' 16-bit type in gradient.dlogits_low,
// the GEMMs' dy as they read it.
Tensor chunk_dlogits(const ClassifierGradient& gradient, const Tensor& logits, const Operand& wte_local, int n,
                     int vocab_rows) {
  return wte_local.dtype != DType::f32 ? rows(gradient.dlogits_low, 0, n, vocab_rows) : logits;
}

// The chunk's dH rows and dwte += from its dlogits.
void chunk_gemms(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                 const ClassifierGradient& gradient, const Tensor& dlogits, const Operand& hidden,
                 const Operand& wte_local, int first, int n, int C) {
  const bool low = dlogits.dtype != DType::f32;
  GemmMode mode;  // 16-bit: the GEMMs read dlogits as written (no f32 dy: no dbias to sum)
  if (low) mode.dy_low = dlogits;
  column_parallel_backward(ctx, mode, group, gradient.dhidden + int64_t(first) * C, gradient.dwte_local, nullptr,
                           low ? nullptr : dlogits.as<float>(), rows(hidden, first, n, C), Tensor{}, wte_local, n, C,
                           vocab.rows);
}

// The chunk's gradient from its logits and the rows' log-normalizers: dlogits, then the GEMMs.
void chunk_gradient(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                    const ClassifierGradient& gradient, const Tensor& logits, const Operand& hidden,
                    const Operand& wte_local, const float* log_normalizers, const int32_t* targets, int first, int n,
                    int C) {
  const Device device = kernels::backend_of(ctx).device();
  const Tensor dlogits = chunk_dlogits(gradient, logits, wte_local, n, vocab.rows);
  kernels::crossentropy_backward(ctx, dlogits, logits, view(log_normalizers + first, Shape{n}, device),
                                 view(targets + first, Shape{n}, device), vocab.begin, gradient.scale, vocab.valid);
  chunk_gemms(ctx, group, vocab, gradient, dlogits, hidden, wte_local, first, n, C);
}

// The chunk's losses and gradient where this rank holds the whole vocabulary (nothing to combine
// over a group between the loss's pieces): one operation for the losses, log-normalizers and
// dlogits (on CUDA one read of the logits), then the GEMMs.
void whole_vocabulary_chunk(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                            const ClassifierGradient& gradient, float* losses, float* log_normalizers,
                            const Tensor& logits, const Operand& hidden, const Operand& wte_local,
                            const int32_t* targets, int first, int n, int C) {
  const Device device = kernels::backend_of(ctx).device();
  const Tensor dlogits = chunk_dlogits(gradient, logits, wte_local, n, vocab.rows);
  kernels::crossentropy_forward_backward(ctx, view(losses + first, Shape{n}, device),
                                         view(log_normalizers + first, Shape{n}, device), dlogits, logits,
                                         view(targets + first, Shape{n}, device), gradient.scale, vocab.valid);
  chunk_gemms(ctx, group, vocab, gradient, dlogits, hidden, wte_local, first, n, C);
}

}  // namespace

void chunked_classifier_forward(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                                float* losses, float* log_normalizers, float* scratch, const Tensor& logits_chunk,
                                const Operand& hidden, const Operand& wte_local, const int32_t* targets, int N, int C,
                                int chunk, const ClassifierGradient* gradient) {
  for (int first = 0; first < N; first += chunk) {
    const int n = std::min(chunk, N - first);
    const Tensor logits = chunk_logits(ctx, logits_chunk, hidden, wte_local, first, n, C, vocab.rows);
    if (gradient && group.slice.size == 1) {
      whole_vocabulary_chunk(ctx, group, vocab, *gradient, losses, log_normalizers, logits, hidden, wte_local, targets,
                             first, n, C);
      continue;
    }
    vocab_parallel_cross_entropy(ctx, group, vocab, losses + first, log_normalizers + first, scratch,
                                 logits.as<float>(), targets + first, n);
    if (gradient)
      chunk_gradient(ctx, group, vocab, *gradient, logits, hidden, wte_local, log_normalizers, targets, first, n, C);
  }
}

void chunked_classifier_backward(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                                 const ClassifierGradient& gradient, const Tensor& logits_chunk, const Operand& hidden,
                                 const Operand& wte_local, const float* log_normalizers, const int32_t* targets, int N,
                                 int C, int chunk) {
  for (int first = 0; first < N; first += chunk) {
    const int n = std::min(chunk, N - first);
    const Tensor logits = chunk_logits(ctx, logits_chunk, hidden, wte_local, first, n, C, vocab.rows);
    chunk_gradient(ctx, group, vocab, gradient, logits, hidden, wte_local, log_normalizers, targets, first, n, C);
  }
}

}  // namespace trident::model
