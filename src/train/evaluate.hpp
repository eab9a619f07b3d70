// The validation loss, defined exactly (also `trident eval`): with T = model.seq_len and
// n = ⌊train.eval_tokens / T⌋ windows, window i has inputs tokens[iT, iT+T) and targets
// tokens[iT+1, iT+T+1); the loss is the mean of the cross-entropy over all n·T targets (summed
// in double). Data-parallel replicas share the windows out (window i on replica i mod size).
#pragma once

#include <vector>

#include "data/token_data.hpp"
#include "model/transformer.hpp"

namespace trident {

// Windows of validation data the definition uses; UserError (all ranks) if the data is too
// short for even one window, naming the file and how many tokens are needed.
int64_t validation_windows(const data::TokenData& val, int64_t eval_tokens, int T);

// This replica's windows, and their batches of B: batch k fills inputs and targets (B, T) and
// returns how many of its rows are real windows (the last batch is padded with window 0, so
// that the activation shapes stay those of training; a batch past the share is all padding).
struct ValidationShare {
  std::vector<int64_t> windows;
  int batches(int B) const { return static_cast<int>((windows.size() + B - 1) / B); }
  int fill(const data::TokenData& val, int batch, int B, int T, int32_t* inputs, int32_t* targets) const;
};
ValidationShare validation_share(int64_t windows, int replica, int replicas);

// The whole model on one rank: the mean loss over all windows (trident eval).
double validation_loss(model::Transformer& gpt, const data::TokenData& val, int64_t windows, int T, int B);

}  // namespace trident
