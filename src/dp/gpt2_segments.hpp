// The GPT-2's gradient buffer as the data-parallel layer's segments (dp/segments.hpp): the one
// place that knows which slices of the flat buffer backward finishes together.
#pragma once

#include <functional>
#include <vector>

#include "dp/segments.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/tensor.hpp"

namespace trident::dp {

// In the order backward finishes them: the stage's blocks from the last (event = the block's
// index in the stage; the final LayerNorm with the last block), then the embeddings (event −1).
// grads: the flat (num_parameters) f32 gradient buffer, or null for the sizes alone.
std::vector<GradientSegment> gpt2_gradient_segments(const model::GptConfig& config,
                                                    const model::Partition& slice, float* grads);
// ZeRO-2's (model/transformer.hpp, gradient slots): block l's tensors at block_gradients(l) —
// each from its layer l — the others at outside; the final norm with the embeddings (event −1:
// reduced once a step with them, not after each micro-batch's last block). Offsets as above.
std::vector<GradientSegment> gpt2_slot_segments(const model::GptConfig& config, const model::Partition& slice,
                                                const model::ParamViews& outside,
                                                const std::function<model::ParamViews(int)>& block_gradients);

// ZeRO-3's parameters (dp/parameter_shards.hpp), as gpt2_slot_segments lays out the gradients:
// memory(layer, tensor) is where block layer's part of the tensor lives (layer −1: a tensor
// outside the blocks, whole), of `dtype`.
std::vector<GradientSegment> gpt2_parameter_segments(const model::GptConfig& config, const model::Partition& slice,
                                                     DType dtype, const std::function<Tensor(int, int)>& memory);

}  // namespace trident::dp
