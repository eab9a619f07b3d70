// The fused, chunked classifier (model.classifier_chunk = n > 0): the tied LM head and its
// cross-entropy over chunks of n rows (tokens), vocabulary-parallel as VocabParallelCrossEntropy
// (tensor_parallel.hpp), so that the (N, Vp/p) logits never exist — one chunk's (n, Vp/p) at a
// time, in one buffer the caller holds.
//
// Per chunk c (rows [r, r + n)):
//   logits_c = H_c wte_iᵀ                       no communication
//   row maxes all-reduced (max); Σ exp(logit − max) and the target logit all-reduced (sum);
//   losses_c and log_normalizers_c kept (N floats each over all chunks).
// and for the gradient, from the same logits in place:
//   dlogits_c = (softmax − onehot) · scale      local
//   dH_c = Σ_i dlogits_c,i wte_i                partial: all-reduce (sum) over the tensor group
//   dwte_i += dlogits_c,iᵀ H_c                  local
// A training step computes both in its forward, as llm.c's fused classifier does: the loss
// scale is known then, and dH (N, C) is kept for the backward instead of the logits. Where the
// gradient is asked for only in backward (a forward for the loss alone came first), the chunk's
// logits are computed again from the kept log-normalizers: a third more of the head's FLOPs.
// On one rank's whole vocabulary (no tensor group) a training forward's loss and dlogits are one
// operation (kernels::crossentropy_forward_backward: on CUDA one read of each logit, not three).
// In 16-bit mode H and wte are the stored 16-bit values, and the cross-entropy's backward writes
// dlogits in their type into a buffer of its own, which the gradient's GEMMs read (no narrowing
// pass: the whole head narrows its dlogits in place).
#pragma once

#include <cstdint>

#include "model/tensor_parallel.hpp"

namespace trident::model {

// The head's gradient: dhidden (N, C) = (all-reduced), dwte_local (Vp/p, C) +=, of the loss
// Σ_rows scale · loss_row (scale = loss_scale / N for the mean loss). dlogits_low: in 16-bit mode
// (chunk, Vp/p) of wte's type, where each chunk's dlogits are written for the GEMMs; empty in fp32
// (dlogits in place of the logits).
struct ClassifierGradient {
  float* dhidden = nullptr;
  float* dwte_local = nullptr;
  float scale = 0;
  Tensor dlogits_low;
};

// hidden (N, C) and wte_local (Vp/p, C) as the GEMMs read them; logits_chunk: (chunk, Vp/p)
// f32 scratch; scratch: 3·chunk floats; losses, log_normalizers (N) =; the gradient too when
// `gradient` is given.
void chunked_classifier_forward(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                                float* losses, float* log_normalizers, float* scratch, const Tensor& logits_chunk,
                                const Operand& hidden, const Operand& wte_local, const int32_t* targets, int N, int C,
                                int chunk, const ClassifierGradient* gradient = nullptr);
// The gradient alone, after a forward without it: each chunk's logits again.
void chunked_classifier_backward(kernels::Context& ctx, const TensorGroup& group, const VocabSlice& vocab,
                                 const ClassifierGradient& gradient, const Tensor& logits_chunk, const Operand& hidden,
                                 const Operand& wte_local, const float* log_normalizers, const int32_t* targets, int N,
                                 int C, int chunk);

}  // namespace trident::model
