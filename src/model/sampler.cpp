// Greedy and temperature / top-k sampling.
#include "model/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/random.hpp"

namespace trident::model {
namespace {

constexpr uint64_t kSamplingStream = 0x5A3D1E;  // the stream of core/random.hpp for sampling draws

}  // namespace

int argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int sample_token(const float* logits, int vocab, const SamplingSettings& settings, int64_t position) {
  if (settings.temperature <= 0.0f) return argmax(logits, vocab);
  std::vector<int> order(vocab);  // candidates, most likely first (ties: lower index)
  std::iota(order.begin(), order.end(), 0);
  const int k = settings.top_k > 0 ? std::min(settings.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<double> weights(k);  // exp((logit − max) / T), summed in order
  double total = 0.0;
  for (int i = 0; i < k; ++i)
    total += weights[i] = std::exp((static_cast<double>(logits[order[i]]) - logits[order[0]]) / settings.temperature);
  double u = uniform_open(random_bits(settings.seed, kSamplingStream, static_cast<uint64_t>(position))) * total;
  for (int i = 0; i < k; ++i) {
    if (u < weights[i]) return order[i];
    u -= weights[i];
  }
  return order[k - 1];  // rounding left u at the end
}

}  // namespace trident::model
