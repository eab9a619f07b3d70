// Validation loss.
#include "train/evaluate.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "data/batches.hpp"

namespace trident {

int64_t validation_windows(const data::TokenData& val, int64_t eval_tokens, int T) {
  const int64_t wanted = eval_tokens / T;
  const int64_t available = (val.size() - 1) / T;
  if (wanted < 1)
    fatal_all("train.eval_tokens = " + std::to_string(eval_tokens) +
              " is less than one window of model.seq_len = " + std::to_string(T) + " tokens");
  if (available < wanted)
    fatal_all("validation data '" + val.files().front() + "' has " + std::to_string(val.size()) +
              " tokens, but train.eval_tokens = " + std::to_string(eval_tokens) + " needs " +
              std::to_string(wanted * T + 1) + "; lower train.eval_tokens to at most " +
              std::to_string(available * T) + " or give more validation data");
  return wanted;
}

double validation_loss(model::Gpt2& gpt, const data::TokenData& val, int64_t windows, int T,
                       int batch) {
  std::vector<int32_t> inputs(static_cast<size_t>(batch) * T), targets(inputs.size());
  double sum = 0.0;
  for (int64_t first = 0; first < windows; first += batch) {
    // The last batch may be partial: fill it up with window 0 and ignore those rows, so that
    // the activation shapes (and buffers) stay those of training.
    const int used = static_cast<int>(std::min<int64_t>(batch, windows - first));
    data::validation_batch(val, first, used, T, inputs.data(), targets.data());
    for (int b = used; b < batch; ++b)
      data::validation_batch(val, 0, 1, T, inputs.data() + size_t(b) * T, targets.data() + size_t(b) * T);
    gpt.forward(inputs.data(), targets.data(), batch, T);
    for (int i = 0; i < used * T; ++i) sum += gpt.losses()[i];
  }
  return sum / static_cast<double>(windows * T);
}

}  // namespace trident
