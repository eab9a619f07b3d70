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
  // Fewer than T + 1 tokens hold no window at all: lowering train.eval_tokens cannot help.
  if (available < 1)
    fatal_all("validation data '" + val.files().front() + "' has " + std::to_string(val.size()) +
              " tokens, fewer than model.seq_len + 1 = " + std::to_string(T + 1) +
              ", the one window validation needs; give more validation data (data.val) or lower model.seq_len to at most " +
              std::to_string(std::max<int64_t>(1, val.size() - 1)));
  if (available < wanted)
    fatal_all("validation data '" + val.files().front() + "' has " + std::to_string(val.size()) +
              " tokens, but train.eval_tokens = " + std::to_string(eval_tokens) + " needs " +
              std::to_string(wanted * T + 1) + "; lower train.eval_tokens to at most " +
              std::to_string(available * T) + " or give more validation data");
  return wanted;
}

ValidationShare validation_share(int64_t windows, int replica, int replicas) {
  ValidationShare share;
  for (int64_t w = replica; w < windows; w += replicas) share.windows.push_back(w);
  return share;
}

int ValidationShare::fill(const data::TokenData& val, int batch, int B, int T, int32_t* inputs,
                          int32_t* targets) const {
  const size_t first = static_cast<size_t>(batch) * B;
  const int used = first >= windows.size() ? 0 : static_cast<int>(std::min<size_t>(B, windows.size() - first));
  for (int b = 0; b < B; ++b)
    data::validation_batch(val, b < used ? windows[first + b] : 0, 1, T, inputs + size_t(b) * T,
                           targets + size_t(b) * T);
  return used;
}

double validation_loss(model::Transformer& gpt, const data::TokenData& val, int64_t windows, int T, int B) {
  const ValidationShare share = validation_share(windows, 0, 1);
  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
  std::vector<float> losses(inputs.size());  // on the host, wherever the model is
  double sum = 0.0;
  for (int k = 0; k < share.batches(B); ++k) {
    const int used = share.fill(val, k, B, T, inputs.data(), targets.data());
    gpt.forward(inputs.data(), targets.data(), B, T);
    gpt.download_losses(0, losses.data());
    for (int i = 0; i < used * T; ++i) sum += losses[i];
  }
  return sum / static_cast<double>(windows * T);
}

}  // namespace trident
