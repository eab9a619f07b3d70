// Which tokens make up a batch. Training: sequence j of the global batch of step s is the
// window of T+1 tokens starting at uniform_below(seed, 2^32 + s, j, N − T): a function of (seed, step,
// j) alone, so the global batch is the same for every layout (each data-parallel rank takes its
// own slice of j) and the position in the data stream is simply the step. Validation: the
// fixed windows i·T of `trident eval`'s definition.
#pragma once

#include <cstdint>
#include <vector>

#include "data/token_data.hpp"

namespace trident::data {

// inputs and targets (B, T) for sequences [first, first + B) of the global batch of `step`.
void training_batch(const TokenData& data, uint64_t seed, int64_t step, int64_t first, int B, int T,
                    int32_t* inputs, int32_t* targets);

// inputs and targets (B, T) for validation windows [first, first + B): window i has inputs
// tokens[iT, iT+T) and targets tokens[iT+1, iT+T+1).
void validation_batch(const TokenData& data, int64_t first, int B, int T, int32_t* inputs,
                      int32_t* targets);

}  // namespace trident::data
