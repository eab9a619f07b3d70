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
#include "train/trainer.hpp"

namespace trident {
namespace {

std::vector<int> parse_split(const std::string& text) {
  std::vector<int> split;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find(',', begin), text.size());
    split.push_back(std::stoi(text.substr(begin, end - begin)));
    begin = end + 1;
  }
  return split;
}

}  // namespace

void Trainer::balance_after(int64_t completed, const StepResult& result) {
  // A warm-up step (primitives created, memory first touched) still joins the collective.
  const bool warm_up = completed - 1 == warm_step_;
  const auto measured = balance_.add_step(warm_up ? pipeline::StepTimes{} : result.pipeline,
                                          warm_up ? 0 : micro_batches_, completed, *collectives_.world);
  if (!measured) return;
  balance_.record(completed, *measured, metrics_.get());
  if (!settings_.balance.pipeline || pp_size_ == 1) return;
  // Every rank holds the same figures (gathered by all), so every rank decides the same.
  pipeline::SplitDecision decision =
      pipeline::decide_split(*measured, stage_layers_, settings_.balance.threshold, settings_.balance.margin);
  // Hysteresis beyond the margin: no move within the cooldown of the last, and none on one
  // measurement alone — the next one must propose the same split (a transient, such as another
  // process taking a core for a moment, does not last two intervals).
  const bool cooling = last_move_step_ >= 0 && completed - last_move_step_ < settings_.balance.cooldown;
  const bool confirmed = decision.split == proposed_split_;
  proposed_split_ = decision.move ? decision.split : std::vector<int>{};
  if (decision.move && cooling) {
    decision.move = false;
    decision.why += ": held, within balance.cooldown = " + std::to_string(settings_.balance.cooldown) +
                    " steps of the move after step " + std::to_string(last_move_step_);
  } else if (decision.move && !confirmed) {
    decision.move = false;
    decision.why += ": proposed, moving if the next measurement agrees";
  } else if (decision.move) {
    decision.why += ": confirmed, moving";
  }
  if (measured->stage_ratio() > settings_.balance.threshold || decision.move)
    print0("balance: after step " + std::to_string(completed) + ": " + decision.why);
  if (metrics_) {
    metrics_->append("balance/current_ms", decision.current_ms);
    metrics_->append("balance/predicted_ms", decision.predicted_ms);
    metrics_->append_int("balance/moved", decision.move ? 1 : 0);
    for (size_t s = 0; s < decision.split.size(); ++s)
      metrics_->append_int("balance/stage" + std::to_string(s) + "/blocks", decision.move ? decision.split[s] : stage_layers_[s]);
  }
  if (decision.move) move_blocks(decision.split, completed);
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
  last_move_step_ = completed;
  proposed_split_.clear();
  warm_step_ = completed;  // the next step creates its primitives and touches new memory
  char text[160];
  std::snprintf(text, sizeof text, "balance: moved blocks after step %lld: stages %s -> %s (%.1f MB of state, %.2f s)",
                static_cast<long long>(completed), from.c_str(), pipeline::split_text(split).c_str(),
                written.bytes / 1e6, seconds_since(start));
  print0(text);
}

void Trainer::adopt_saved_split(const ckpt::Metadata& saved) {
  if (!settings_.balance.pipeline || saved.pipeline != pp_size_ || saved.stage_layers.empty()) return;
  const std::vector<int> split = parse_split(saved.stage_layers);
  if (split == stage_layers_) return;
  print0("balance: resuming with the split the checkpoint recorded, stages " + saved.stage_layers + " (the deck's: " +
         pipeline::split_text(stage_layers_) + ")");
  rebuild_model(split);
}

}  // namespace trident
