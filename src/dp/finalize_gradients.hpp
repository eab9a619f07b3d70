// The step's gradients made final after backward, across every parallel dimension — the part of
// a step that belongs to the data-parallel layer, as Megatron-Core's finalize_model_grads:
//   tied embedding  with pipeline stages, the first stage's wte (the embedding) and the last
//                   stage's (the classifier) are one parameter: their gradients are summed
//                   over the embedding group (the two stages' ranks of a tensor slice and
//                   replica), so both copies take the same update.
//   global norm     ‖g‖ = √(Σ over every parameter of g²)/S (S: fp16's loss scale, 1 otherwise):
//                   each rank sums the squares of what it holds — its ZeRO-1 shard, its tensor
//                   slice of the split tensors, its stage's tensors, the tied wte once (on the
//                   first stage) — then the partial sums are added over the data group (when
//                   sharded), the tensor group (split tensors only: the replicated ones are
//                   equal on every slice) and the pipeline group. The clipping factor is
//                   min(1, clip/‖g‖).
//   bad step        a NaN or Inf in the loss or the norm on any rank skips the step on every
//                   rank: the flag is agreed over the world.
// Every rank calls each function (they are collective over the groups named).
#pragma once

#include <cstdint>

#include "comm/communicator.hpp"
#include "dp/reducer.hpp"
#include "model/gpt2.hpp"

namespace trident::dp {

struct GradientNorm {
  float norm = 0;          // ‖g‖ / S
  float clip_factor = 1;   // min(1, clip / norm); 1 without clipping (clip = 0)
};

// Pipeline only (`embedding` null: nothing to do): wte's gradient summed over the embedding
// group, ordered on the model's stream and waited for.
void tie_embedding_gradients(model::Gpt2& model, comm::Communicator* embedding);

// The global norm of the gradients divided by `gradient_scale`, and the factor that clips it
// to `clip` (0: no clipping). `shard`: the part of this rank's gradients it holds summed
// (ZeRO-1's shard, or all of them).
GradientNorm global_grad_norm(model::Gpt2& model, const Shard& shard, float clip, double gradient_scale,
                              comm::Communicator& data, comm::Communicator& tensor, comm::Communicator& pipeline);

// Whether the step must be skipped: `loss` or `norm` not finite on any rank of `world`.
bool any_rank_not_finite(float loss, float norm, comm::Communicator& world);

}  // namespace trident::dp
