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
#include "deck/value.hpp"
#include "job/memory_plan.hpp"
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
  balance_.record(completed, *measured, log_.metrics());
  // Every rank holds the same figures (gathered by all), so every rank decides the same.
  const BalanceSettings& b = settings_.balance;
  bool moved = false;
  if (b.replicas && dp_size_ > 1) {
    pipeline::Decision shares = pipeline::decide_shares(*measured, shares_, b.threshold, b.margin);
    if (settle(shares, share_hysteresis_, b, measured->replica_ratio(), completed, shares_, "replica", "micro_batches",
               log_.metrics()))
      apply_shares(shares.counts, completed), moved = true;
  }
  if (b.pipeline && pp_size_ > 1) {
    pipeline::Decision split = pipeline::decide_split(*measured, stage_layers_, b.threshold, b.margin);
    if (split.move) {  // every rank has the same decision: all of them check, together
      const std::string problem = memory_shortfall_anywhere(split.counts, B_, micro_batches_);
      if (!problem.empty()) split.move = false, split.why += "; but it does not fit: " + problem + ": no move";
    }
    if (settle(split, split_hysteresis_, b, measured->stage_ratio(), completed, stage_layers_, "stage", "blocks",
               log_.metrics()))
      move_blocks(split.counts, completed), moved = true;
  }
  if (b.micro_batches != "fixed") balance_micro_batches(completed, *measured, moved);
}

void Trainer::balance_micro_batches(int64_t completed, const pipeline::BalanceFigures& measured, bool moved) {
  const BalanceSettings& b = settings_.balance;
  if (moved) {  // other stages or shares now: what was measured no longer holds
    micro_batch_cost_.clear();
    return;
  }
  const int64_t sequences = micro_batches_ * B_;  // a replica's per step, with equal shares
  double slowest = 0;
  for (int s = 0; s < pp_size_; ++s) slowest = std::max(slowest, measured.stage_ms(s));
  micro_batch_cost_.observe(B_, slowest);
  const std::vector<int> allowed = allowed_micro_batch_counts(sequences);  // collective, like the measurement
  const std::string after = "balance: after step " + std::to_string(completed) + ": ";
  if (b.micro_batches == "model" && !micro_batch_cost_.fitted()) {
    // One size measured: the fixed cost and the cost per sequence are not yet apart. Another
    // size for an interval separates them (the same sequences, so the same model trained).
    const int probe = pipeline::probe_count(static_cast<int>(micro_batches_), pp_size_, allowed);
    if (probe == 0) return;
    char text[160];
    std::snprintf(text, sizeof text, "micro-batches (model): %.3f ms per micro-batch of %d measured; %d x %lld for "
                  "an interval, to measure a second size", slowest, B_, probe, static_cast<long long>(sequences / probe));
    print0(after + text);
    apply_micro_batches(probe, completed);
    report_next_count_ = true;  // the decision the probe makes possible is printed, whatever it is
    return;
  }
  pipeline::Decision count = b.micro_batches == "seed"
                                 ? pipeline::decide_seed_count(measured, static_cast<int>(micro_batches_), allowed, b.threshold)
                                 : pipeline::decide_model_count(micro_batch_cost_, static_cast<int>(micro_batches_), pp_size_,
                                                                sequences, allowed, b.margin);
  const bool proposed = count.move;
  count_hysteresis_.apply(count, completed, b.cooldown);
  if (proposed || measured.stage_ratio() > b.threshold || report_next_count_) print0(after + count.why);
  report_next_count_ = false;
  if (log_.metrics()) {
    log_.metrics()->append_int("balance/micro_batches", count.move ? count.counts[0] : micro_batches_);
    log_.metrics()->append_int("balance/micro_batch", count.move ? sequences / count.counts[0] : B_);
    log_.metrics()->append("balance/micro_batches_predicted_ms", count.predicted_ms);
  }
  if (count.move) apply_micro_batches(count.counts[0], completed);
}

std::vector<int> Trainer::allowed_micro_batch_counts(int64_t sequences) {
  const std::vector<int> counts = pipeline::micro_batch_counts(sequences);
  std::vector<double> short_of_memory(counts.size());  // (counts) 1 where this rank's memory lacks room
  for (size_t i = 0; i < counts.size(); ++i)
    short_of_memory[i] = !micro_batch_shortfall(job_.device, job_.settings, job_.record, job_.grid, config_, &job_.topology, recompute_, stage_layers_,
                                                static_cast<int>(sequences / counts[i]), counts[i], memory_)
                               .empty();
  collectives_.world->all_reduce(short_of_memory.data(), short_of_memory.size(), DType::f64, comm::Op::Max, Stream{})
      .wait();
  std::vector<int> allowed;
  for (size_t i = 0; i < counts.size(); ++i)
    if (short_of_memory[i] == 0) allowed.push_back(counts[i]);
  return allowed;
}

std::string Trainer::memory_shortfall_anywhere(const std::vector<int>& split, int micro_batch, int64_t micro_batches) {
  const std::string mine = micro_batch_shortfall(job_.device, job_.settings, job_.record, job_.grid, config_, &job_.topology, recompute_, split,
                                                 micro_batch, static_cast<int>(micro_batches), memory_);
  double short_of_memory = mine.empty() ? 0 : 1;
  collectives_.world->all_reduce(&short_of_memory, 1, DType::f64, comm::Op::Max, Stream{}).wait();
  if (short_of_memory == 0) return "";
  return mine.empty() ? "the memory of another rank's host is short" : mine;
}

void Trainer::apply_micro_batches(int count, int64_t completed) {
  const int64_t sequences = micro_batches_ * B_;
  const std::string from = std::to_string(micro_batches_) + " x " + std::to_string(B_);
  micro_batches_ = count;
  B_ = static_cast<int>(sequences / count);
  // Equal shares again: the count is per replica (a replica balance measures anew).
  shares_.assign(dp_size_, count);
  first_micro_batch_ = static_cast<int64_t>(dp_rank_) * count;
  share_hysteresis_ = {};
  rebuild_runner();
  warm_step_ = completed;  // the next step creates primitives for the new shapes
  print0("balance: micro-batches now " + std::to_string(micro_batches_) + " x " + std::to_string(B_) +
         " sequences a replica (were " + from + ")");
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
  const ckpt::WriteResult written = ckpt::write_checkpoint(path, world_, state_view(), meta);
  if (!written.error.empty()) {
    print0("balance: after step " + std::to_string(completed) + ": no move, the state could not be written to " + path +
           ": " + written.error);
    return;
  }
  rebuild_model(split);
  const std::string problem = ckpt::read_checkpoint(path, world_, state_view());
  if (!problem.empty()) throw RunFailure("balance: moving blocks to stages " + pipeline::split_text(split) + ": " + problem, kExitFault);
  if (rank_ == 0) std::remove(path.c_str());
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

void Trainer::adopt_saved_batching(const ckpt::Metadata& saved) {
  const BalanceSettings& b = settings_.balance;
  const int64_t sequences = micro_batches_ * B_;
  // The micro-batch size balance.micro_batches chose, where it divides this run's sequences per
  // replica (another data-parallel degree or global batch may not) and fits in memory.
  if (b.micro_batches != "fixed" && saved.micro_batch > 0 && saved.micro_batch != B_ && sequences % saved.micro_batch == 0) {
    const int count = static_cast<int>(sequences / saved.micro_batch);
    const std::vector<int> allowed = allowed_micro_batch_counts(sequences);  // collective
    if (std::find(allowed.begin(), allowed.end(), count) != allowed.end()) {
      print0("balance: resuming with the micro-batches the checkpoint recorded, " + std::to_string(count) + " x " +
             std::to_string(saved.micro_batch));
      apply_micro_batches(count, saved.step);
    }
  }
  // The replica shares balance.replicas set, where the replicas and the count are the same.
  if (!b.replicas || saved.data != dp_size_ || saved.replica_shares.empty()) return;
  const std::vector<int64_t> recorded = deck::parse_int_list(saved.replica_shares);
  std::vector<int> shares(recorded.begin(), recorded.end());
  int64_t total = 0;
  for (int n : shares) total += n;
  if (static_cast<int>(shares.size()) != dp_size_ || total != micro_batches_ * dp_size_ || shares == shares_) return;
  print0("balance: resuming with the replica shares the checkpoint recorded, " + saved.replica_shares);
  apply_shares(shares, saved.step);
}

}  // namespace trident
