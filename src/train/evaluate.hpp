// The validation loss, defined exactly (also `trident eval`): with T = model.seq_len and
// n = ⌊train.eval_tokens / T⌋ windows, window i has inputs tokens[iT, iT+T) and targets
// tokens[iT+1, iT+T+1); the loss is the mean of the cross-entropy over all n·T targets
// (summed in double, in window order).
#pragma once

#include <mpi.h>

#include "data/token_data.hpp"
#include "model/gpt2.hpp"

namespace trident {

// Windows of validation data the definition uses; UserError (all ranks) if the data is too
// short for even one window, naming the file and how many tokens are needed.
int64_t validation_windows(const data::TokenData& val, int64_t eval_tokens, int T);

// Runs the model on the windows, `batch` windows at a time, the windows shared out over the
// ranks of `group` (window i on rank i mod size; sums added in double over the group). Returns
// the mean loss, the same on every rank of the group. Collective over `group`.
double validation_loss(model::Gpt2& gpt, const data::TokenData& val, int64_t windows, int T,
                       int batch, MPI_Comm group);

}  // namespace trident
