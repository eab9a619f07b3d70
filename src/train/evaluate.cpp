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
                       int batch, MPI_Comm group) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(group, &rank));
  MPI_CHECK(MPI_Comm_size(group, &size));
  std::vector<int64_t> mine;
  for (int64_t w = rank; w < windows; w += size) mine.push_back(w);
  std::vector<int32_t> inputs(static_cast<size_t>(batch) * T), targets(inputs.size());
  double sum = 0.0;
  for (size_t first = 0; first < mine.size(); first += batch) {
    // The last batch may be partial: fill it up with window 0 and ignore those rows, so that
    // the activation shapes (and buffers) stay those of training.
    const int used = static_cast<int>(std::min<size_t>(batch, mine.size() - first));
    for (int b = 0; b < batch; ++b)
      data::validation_batch(val, b < used ? mine[first + b] : 0, 1, T,
                             inputs.data() + size_t(b) * T, targets.data() + size_t(b) * T);
    gpt.forward(inputs.data(), targets.data(), batch, T);
    for (int i = 0; i < used * T; ++i) sum += gpt.losses()[i];
  }
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, group));
  return sum / static_cast<double>(windows * T);
}

}  // namespace trident
