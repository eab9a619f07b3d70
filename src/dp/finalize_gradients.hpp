// The step's gradients made final after backward, across every parallel dimension — the part of
// a step that belongs to the data-parallel layer, as Megatron-Core's finalize_model_grads:
//   tied embedding  with pipeline stages, the first stage's wte (the embedding) and the last
//                   stage's (the classifier) are one parameter: their gradients, each reduced
//                   over its stage's data group, are summed over the embedding group (the two
//                   stages' ranks of a tensor slice and replica), so both copies take the same
//                   update (dp::GradientReducer::sum_tied).
//   global norm     ‖g‖ = √(Σ over every parameter of g²)/S (S: fp16's loss scale, 1 otherwise):
//                   each rank sums the squares of what it holds — its ZeRO ranges, its tensor
//                   slice of the split tensors, its stage's tensors, the tied wte once (on the
//                   first stage) — then the partial sums are added over the data group (when
//                   sharded), the tensor group (split tensors only: the replicated ones are
//                   equal on every slice) and the pipeline group. The clipping factor is
//                   min(1, clip/‖g‖) (kernels::step_control, on the device).
//   bad step        a NaN or Inf in the loss or the norm on any rank skips the step on every
//                   rank: the flag (kernels::kSkipStep) is agreed over the world.
// All of it stays on the device, in the step's scalars (kernels::StepScalar), the collectives
// ordered on the model's stream: the host reads nothing until the step's one read at its end.
// Every rank calls each function (they are collective over the groups named).
#pragma once

#include <cstdint>

#include "comm/communicator.hpp"
#include "dp/reducer.hpp"
#include "model/transformer.hpp"

namespace trident::dp {

// The squared global norm's two parts into squares (f64 (2), the model's device memory): split
// over the tensor group, and replicated on it, each summed over the groups. `owned`: the ranges of
// this rank's gradients it holds summed (ZeRO's, or all of them), in the model's flat gradient
// buffer, or — `owned_gradients` given (ZeRO-2) — there, one range after the other.
void sum_gradient_squares(model::Transformer& model, const model::FlatRanges& owned, const float* owned_gradients,
                          const Tensor& squares, comm::Communicator& data, comm::Communicator& tensor,
                          comm::Communicator& pipeline);

// The skip flag at `flag` (one f64, the model's device memory) made the largest of every rank's
// in `world`, so that a fault confined to one rank cannot split them.
void agree_on_skip(model::Transformer& model, double* flag, comm::Communicator& world);

}  // namespace trident::dp
