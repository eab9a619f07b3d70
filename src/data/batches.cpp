// Training and validation batches.
#include "data/batches.hpp"

#include <stdexcept>

#include "core/random.hpp"

namespace trident::data {
namespace {

void window(const TokenData& data, int64_t start, int T, int32_t* inputs, int32_t* targets) {
  std::vector<int32_t> tokens(T + 1);
  data.copy(start, T + 1, tokens.data());
  for (int t = 0; t < T; ++t) inputs[t] = tokens[t], targets[t] = tokens[t + 1];
}

}  // namespace

void training_batch(const TokenData& data, uint64_t seed, int64_t step, int64_t first, int B, int T,
                    int32_t* inputs, int32_t* targets) {
  const int64_t starts = data.size() - T;  // windows of T+1 tokens
  if (starts < 1) throw std::runtime_error("training data has fewer than model.seq_len + 1 tokens");
  for (int b = 0; b < B; ++b) {
    // Streams from 2^32 on: apart from the initialisation's streams (one per parameter tensor).
    const uint64_t stream = (uint64_t{1} << 32) + static_cast<uint64_t>(step);
    const int64_t start = static_cast<int64_t>(uniform_below(seed, stream, first + b, starts));
    window(data, start, T, inputs + static_cast<size_t>(b) * T, targets + static_cast<size_t>(b) * T);
  }
}

void validation_batch(const TokenData& data, int64_t first, int B, int T, int32_t* inputs,
                      int32_t* targets) {
  for (int b = 0; b < B; ++b)
    window(data, (first + b) * T, T, inputs + static_cast<size_t>(b) * T,
           targets + static_cast<size_t>(b) * T);
}

}  // namespace trident::data
