// The trainer as the balancer's target (train/balancer.hpp): its batching, what fits in memory,
// and the moves themselves — new shares, a new micro-batch size, and blocks moved between stages:
// the state written into a scratch checkpoint file, the model and everything built on it rebuilt
// for the new split, the state read back through the resharding reader the checkpoint resume uses.
#include <algorithm>
#include <cstdio>

#include "ckpt/checkpoint_file.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "job/memory_plan.hpp"
#include "pipeline/schedule.hpp"
#include "train/trainer.hpp"

namespace trident {

BatchLayout Trainer::batch_layout() const { return {split_, B_, micro_batches_, shares_}; }

std::vector<int> Trainer::allowed_micro_batch_counts(int64_t sequences) {
  std::vector<int> counts = pipeline::micro_batch_counts(sequences);
  if (settings_.parallel.virtual_stages > 1)  // interleaved: groups of the stages (pipeline::stage_actions)
    counts.erase(std::remove_if(counts.begin(), counts.end(), [&](int m) { return m % pp_size_ != 0; }), counts.end());
  std::vector<double> short_of_memory(counts.size());  // (counts) 1 where this rank's memory lacks room
  for (size_t i = 0; i < counts.size(); ++i)
    short_of_memory[i] = !micro_batch_shortfall(job_.device, job_.settings, job_.record, job_.grid, config_, &job_.topology, recompute_, split_,
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

void Trainer::apply_micro_batches(int count) {
  const int64_t sequences = micro_batches_ * B_;
  const std::string from = std::to_string(micro_batches_) + " x " + std::to_string(B_);
  micro_batches_ = count;
  B_ = static_cast<int>(sequences / count);
  // Equal shares again: the count is per replica (a replica balance measures anew).
  shares_.assign(dp_size_, count);
  first_micro_batch_ = static_cast<int64_t>(dp_rank_) * count;
  rebuild_runner();
  print0("balance: micro-batches now " + std::to_string(micro_batches_) + " x " + std::to_string(B_) +
         " sequences a replica (were " + from + ")");
}

void Trainer::apply_shares(const std::vector<int>& shares) {
  shares_ = shares;
  first_micro_batch_ = 0;
  for (int d = 0; d < dp_rank_; ++d) first_micro_batch_ += shares_[d];
  runner_->set_micro_batches(shares_[dp_rank_]);
  print0("balance: replica shares now " + pipeline::split_text(shares_) + " micro-batches of the global batch's " +
         std::to_string(micro_batches_ * dp_size_));
}

bool Trainer::move_blocks(const std::vector<int>& split, int64_t completed) {
  const auto start = SteadyClock::now();
  const std::vector<int> before = split_;
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
    return false;
  }
  rebuild_model(split);
  const std::string problem = ckpt::read_checkpoint(path, world_, state_view());
  if (!problem.empty()) throw RunFailure("balance: moving blocks to " + pipeline::split_text(split) + ": " + problem, kExitFault);
  state_was_read();
  if (rank_ == 0) std::remove(path.c_str());
  // Interleaved: the chunks' blocks, then their stages' sums.
  const bool interleaved = settings_.parallel.virtual_stages > 1;
  const std::string stages = interleaved ? " (stages " + pipeline::split_text(pipeline::stage_totals(before, pp_size_)) +
                                               " -> " + pipeline::split_text(pipeline::stage_totals(split, pp_size_)) + ")"
                                         : "";
  char text[320];
  std::snprintf(text, sizeof text, "balance: moved blocks after step %lld: %s %s -> %s%s (%.1f MB of state, %.2f s)",
                static_cast<long long>(completed), interleaved ? "chunks" : "stages", pipeline::split_text(before).c_str(),
                pipeline::split_text(split).c_str(), stages.c_str(), written.bytes / 1e6, seconds_since(start));
  print0(text);
  return true;
}

}  // namespace trident
