// The GPT-2's gradient buffer as the data-parallel layer's segments (dp/segments.hpp): the one
// place that knows which slices of the flat buffer backward finishes together.
#pragma once

#include <vector>

#include "dp/segments.hpp"
#include "model/config.hpp"
#include "model/params.hpp"

namespace trident::dp {

// In the order backward finishes them: the stage's blocks from the last (event = the block's
// index in the stage; the final LayerNorm with the last block), then the embeddings (event −1).
// grads: the flat (num_parameters) f32 gradient buffer, or null for the sizes alone.
std::vector<GradientSegment> gpt2_gradient_segments(const model::GptConfig& config,
                                                    const model::Partition& slice, float* grads);

}  // namespace trident::dp
