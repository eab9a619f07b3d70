// The trainer's side of load balancing (issue 18): the measurement after each step, the
// pipeline re-split it may decide, and the move itself — the state written into a scratch
// checkpoint file, the model and everything built on it rebuilt for the new split, the state
// read back through the resharding reader the checkpoint resume uses.
#include <algorithm>
#include <cstdio>

#include "ckpt/checkpoint_file.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/mpi_util.hpp"
#include "deck/value.hpp"
#include "train/trainer.hpp"

namespace trident {
namespace {

// After the margin, the hysteresis; then the decision on the console (when imbalanced or
// moving) and in metrics.h5 (always): its figures and each worker's count from now on, e.g.
// balance/stage1/blocks. True when the move is to be made.
bool settle(pipeline::Decision& decision, pipeline::Hysteresis& hysteresis, const BalanceSettings& settings,
            double ratio, int64_t completed, const std::vector<int>& now, const std::string& series,
            const std::string& per_worker, metrics::MetricsFile* metrics) {
  hysteresis.apply(decision, completed, settings.cooldown);
  if (ratio > settings.threshold || decision.move)
    print0("balance: after step " + std::to_string(completed) + ": " + decision.why);
  if (!metrics) return decision.move;
  metrics->append("balance/" + series + "_current_ms", decision.current_ms);
  metrics->append("balance/" + series + "_predicted_ms", decision.predicted_ms);
  metrics->append_int("balance/" + series + "_moved", decision.move ? 1 : 0);
  for (size_t w = 0; w < now.size(); ++w)
    metrics->append_int("balance/" + series + std::to_string(w) + "/" + per_worker, decision.move ? decision.counts[w] : now[w]);
  return decision.move;
}

}  // namespace

void Trainer::balance_after(int64_t completed, const StepResult& result) {
  // A warm-up step (primitives created, memory first touched) still joins the collective.
  const bool warm_up = completed - 1 == warm_step_;
  const auto measured = balance_.add_step(warm_up ? pipeline::StepTimes{} : result.pipeline,
                                          warm_up ? 0 : runner_->micro_batches(), completed, *collectives_.world);
  if (!measured) return;
  balance_.record(completed, *measured, metrics_.get());
  // Every rank holds the same figures (gathered by all), so every rank decides the same.
  const BalanceSettings& b = settings_.balance;
  if (b.replicas && dp_size_ > 1) {
    pipeline::Decision shares = pipeline::decide_shares(*measured, shares_, b.threshold, b.margin);
    if (settle(shares, share_hysteresis_, b, measured->replica_ratio(), completed, shares_, "replica", "micro_batches",
               metrics_.get()))
      apply_shares(shares.counts, completed);
  }
  if (b.pipeline && pp_size_ > 1) {
    pipeline::Decision split = pipeline::decide_split(*measured, stage_layers_, b.threshold, b.margin);
    if (settle(split, split_hysteresis_, b, measured->stage_ratio(), completed, stage_layers_, "stage", "blocks",
               metrics_.get()))
      move_blocks(split.counts, completed);
  }
}

void Trainer::apply_shares(const std::vector<int>& shares, int64_t completed) {
  shares_ = shares;
  first_micro_batch_ = 0;
  for (int d = 0; d < dp_rank_; ++d) first_micro_batch_ += shares_[d];
  runner_->set_micro_batches(shares_[dp_rank_]);
  warm_step_ = completed;  // the next step may touch new activation slots
  print0("balance: replica shares now " + pipeline::split_text(shares_) + " micro-batches of the global batch's " +
         std::to_string(micro_batches_ * dp_size_));
}

void Trainer::move_blocks(const std::vector<int>& split, int64_t completed) {
  const auto start = SteadyClock::now();
  const std::string from = pipeline::split_text(stage_layers_);
  // Not in the checkpoint directory: pruning and resume = auto never see it, and the lineage
  // (ckpt/lineage.hpp) is untouched. Removed once read.
  const std::string path = run_dir_ + "/balance-move.h5";
  checkpointer_->wait();  // an asynchronous checkpoint still writing holds the HDF5 lock
  ckpt::Metadata meta = metadata(completed);
  meta.kind = "full";
  const ckpt::WriteResult written = ckpt::write_checkpoint(path, groups_.world(), state_view(), meta);
  if (!written.error.empty()) {
    print0("balance: after step " + std::to_string(completed) + ": no move, the state could not be written to " + path +
           ": " + written.error);
    return;
  }
  rebuild_model(split);
  const std::string problem = ckpt::read_checkpoint(path, groups_.world(), state_view());
  if (!problem.empty()) throw RunFailure("balance: moving blocks to stages " + pipeline::split_text(split) + ": " + problem, kExitFault);
  if (world_rank() == 0) std::remove(path.c_str());
  warm_step_ = completed;  // the next step creates its primitives and touches new memory
  char text[160];
  std::snprintf(text, sizeof text, "balance: moved blocks after step %lld: stages %s -> %s (%.1f MB of state, %.2f s)",
                static_cast<long long>(completed), from.c_str(), pipeline::split_text(split).c_str(),
                written.bytes / 1e6, seconds_since(start));
  print0(text);
}

void Trainer::adopt_saved_split(const ckpt::Metadata& saved) {
  if (!settings_.balance.pipeline || saved.pipeline != pp_size_ || saved.stage_layers.empty()) return;
  const std::vector<int64_t> counts = deck::parse_int_list(saved.stage_layers);  // split_text's "4,4"
  const std::vector<int> split(counts.begin(), counts.end());
  if (split == stage_layers_) return;
  print0("balance: resuming with the split the checkpoint recorded, stages " + saved.stage_layers + " (the deck's: " +
         pipeline::split_text(stage_layers_) + ")");
  rebuild_model(split);
}

}  // namespace trident
