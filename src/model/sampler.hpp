// Choosing the next token from the logits: greedy (temperature 0: the first index of the largest
// logit) or a draw from softmax(logits / temperature), restricted to the top_k most likely
// tokens when top_k > 0. The draw is a pure function of (seed, position) (core/random.hpp), so
// the same seed gives the same text on any machine that computes the same logits.
#pragma once

#include <cstdint>

namespace trident::model {

struct SamplingSettings {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0: every token
  uint64_t seed = 1;
};

// Over logits[0, vocab): the index chosen for the token at `position`.
int sample_token(const float* logits, int vocab, const SamplingSettings& settings, int64_t position);
int argmax(const float* logits, int n);  // the first index of the largest value

}  // namespace trident::model
