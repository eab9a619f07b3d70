// The balancer's decisions.
#include "train/balancer.hpp"

#include <algorithm>
#include <cstdio>

#include "core/log.hpp"
#include "deck/value.hpp"
#include "pipeline/schedule.hpp"

namespace trident {
namespace {

// After the margin, the hysteresis; then the decision on the console (when imbalanced or
// moving) and in metrics.h5 (always): its figures and each worker's count from now on, e.g.
// balance/stage1/blocks (`worker`: stage; virtual_stage for an interleaved split, whose counts
// are per virtual stage). True when the move is to be made.
bool settle(pipeline::Decision& decision, pipeline::Hysteresis& hysteresis, const BalanceSettings& settings,
            double ratio, int64_t completed, const std::vector<int>& now, const std::string& series,
            const std::string& worker, const std::string& per_worker, metrics::MetricsFile* metrics) {
  hysteresis.apply(decision, completed, settings.cooldown);
  if (ratio > settings.threshold || decision.move)
    print0("balance: after step " + std::to_string(completed) + ": " + decision.why);
  if (!metrics) return decision.move;
  metrics->append("balance/" + series + "_current_ms", decision.current_ms);
  metrics->append("balance/" + series + "_predicted_ms", decision.predicted_ms);
  metrics->append_int("balance/" + series + "_moved", decision.move ? 1 : 0);
  for (size_t w = 0; w < now.size(); ++w)
    metrics->append_int("balance/" + worker + std::to_string(w) + "/" + per_worker, decision.move ? decision.counts[w] : now[w]);
  return decision.move;
}

std::vector<int> int_list(const std::string& text) {  // split_text's "4,4"
  const std::vector<int64_t> values = deck::parse_int_list(text);
  return std::vector<int>(values.begin(), values.end());
}

}  // namespace

Balancer::Balancer(const BalanceSettings& settings, const layout::Grid& grid, int chunks, BalanceTarget& target)
    : settings_(settings),
      data_(grid.dp_size()),
      stages_(grid.pp_size()),
      chunks_(chunks),
      target_(target),
      monitor_(settings, grid) {}

void Balancer::after_step(int64_t completed, const pipeline::StepTimes& times, int64_t micro_batches,
                          comm::Communicator& world, metrics::MetricsFile* metrics) {
  // A warm-up step (primitives created, memory first touched) still joins the collective.
  const bool warm_up = completed - 1 == warm_step_;
  const auto measured = monitor_.add_step(warm_up ? pipeline::StepTimes{} : times, warm_up ? 0 : micro_batches,
                                          completed, world);
  if (!measured) return;
  monitor_.record(completed, *measured, metrics);
  // Every rank holds the same figures (gathered by all), so every rank decides the same.
  const BalanceSettings& b = settings_;
  bool moved = false;
  if (b.replicas && data_ > 1) {
    const std::vector<int> now = target_.batch_layout().shares;
    // Interleaved, a replica runs its micro-batches in groups of the stages: shares move by groups.
    const int group = chunks_ > 1 ? stages_ : 1;
    pipeline::Decision shares = pipeline::decide_shares(*measured, now, b.threshold, b.margin, group);
    if (settle(shares, share_hysteresis_, b, measured->replica_ratio(), completed, now, "replica", "replica",
               "micro_batches", metrics))
      shares_now(shares.counts, completed), moved = true;
  }
  if (b.pipeline && stages_ > 1) {
    const BatchLayout layout = target_.batch_layout();
    pipeline::Decision split = pipeline::decide_split(*measured, layout.split, stages_, b.threshold, b.margin);
    if (split.move) {  // every rank has the same decision: all of them check, together
      const std::string problem =
          target_.memory_shortfall_anywhere(split.counts, layout.micro_batch, layout.micro_batches);
      if (!problem.empty()) split.move = false, split.why += "; but it does not fit: " + problem + ": no move";
    }
    if (settle(split, split_hysteresis_, b, measured->stage_ratio(), completed, layout.split, "stage",
               chunks_ > 1 ? "virtual_stage" : "stage", "blocks", metrics)) {
      if (target_.move_blocks(split.counts, completed)) warm_step_ = completed;  // new primitives, new memory
      moved = true;
    }
  }
  if (b.micro_batches != "fixed") decide_micro_batches(completed, *measured, moved, metrics);
}

void Balancer::decide_micro_batches(int64_t completed, const pipeline::BalanceFigures& measured, bool moved,
                                    metrics::MetricsFile* metrics) {
  const BalanceSettings& b = settings_;
  if (moved) {  // other stages or shares now: what was measured no longer holds
    micro_batch_cost_.clear();
    return;
  }
  const BatchLayout layout = target_.batch_layout();
  const int64_t sequences = layout.micro_batches * layout.micro_batch;  // a replica's per step, with equal shares
  double slowest = 0;
  for (int s = 0; s < stages_; ++s) slowest = std::max(slowest, measured.stage_ms(s));
  micro_batch_cost_.observe(layout.micro_batch, slowest);
  const std::vector<int> allowed = target_.allowed_micro_batch_counts(sequences);  // collective, like the measurement
  const std::string after = "balance: after step " + std::to_string(completed) + ": ";
  const int current = static_cast<int>(layout.micro_batches);
  if (b.micro_batches == "model" && !micro_batch_cost_.fitted()) {
    // One size measured: the fixed cost and the cost per sequence are not yet apart. Another
    // size for an interval separates them (the same sequences, so the same model trained).
    const int probe = pipeline::probe_count(current, stages_, allowed);
    if (probe == 0) return;
    char text[160];
    std::snprintf(text, sizeof text, "micro-batches (model): %.3f ms per micro-batch of %d measured; %d x %lld for "
                  "an interval, to measure a second size", slowest, layout.micro_batch, probe,
                  static_cast<long long>(sequences / probe));
    print0(after + text);
    micro_batches_now(probe, completed);
    report_next_count_ = true;  // the decision the probe makes possible is printed, whatever it is
    return;
  }
  pipeline::Decision count = b.micro_batches == "seed"
                                 ? pipeline::decide_seed_count(measured, current, allowed, b.threshold)
                                 : pipeline::decide_model_count(micro_batch_cost_, current, stages_, sequences, allowed,
                                                                b.margin, chunks_);
  const bool proposed = count.move;
  count_hysteresis_.apply(count, completed, b.cooldown);
  if (proposed || measured.stage_ratio() > b.threshold || report_next_count_) print0(after + count.why);
  report_next_count_ = false;
  if (metrics) {
    metrics->append_int("balance/micro_batches", count.move ? count.counts[0] : layout.micro_batches);
    metrics->append_int("balance/micro_batch", count.move ? sequences / count.counts[0] : layout.micro_batch);
    metrics->append("balance/micro_batches_predicted_ms", count.predicted_ms);
  }
  if (count.move) micro_batches_now(count.counts[0], completed);
}

void Balancer::micro_batches_now(int count, int64_t completed) {
  target_.apply_micro_batches(count);
  share_hysteresis_ = {};  // equal shares again: a replica balance measures anew
  warm_step_ = completed;  // the next step creates primitives for the new shapes
}

void Balancer::shares_now(const std::vector<int>& shares, int64_t completed) {
  target_.apply_shares(shares);
  warm_step_ = completed;  // the next step may touch new activation slots
}

void Balancer::save(ckpt::Metadata& checkpoint) const {
  const BatchLayout layout = target_.batch_layout();
  // The deck's split, micro-batch size and shares, or the last ones balancing chose.
  static_cast<ckpt::BalanceState&>(checkpoint) = {
      pipeline::split_text(pipeline::stage_totals(layout.split, stages_)), layout.micro_batch,
      pipeline::split_text(layout.shares), chunks_ > 1 ? pipeline::split_text(layout.split) : ""};
}

void Balancer::restore(const ckpt::Metadata& saved, const std::string& /*path*/) {
  // The split balance.pipeline chose, where the stages and their chunks are as many.
  const std::string saved_split = chunks_ > 1 ? saved.virtual_layers : saved.stage_layers;
  if (settings_.pipeline && saved.pipeline == stages_ && !saved_split.empty()) {
    const std::vector<int> split = int_list(saved_split);
    const std::vector<int> deck_split = target_.batch_layout().split;
    if (split.size() == deck_split.size() && split != deck_split) {
      print0(std::string("balance: resuming with the split the checkpoint recorded, ") +
             (chunks_ > 1 ? "chunks " : "stages ") + saved_split + " (the deck's: " + pipeline::split_text(deck_split) +
             ")");
      target_.build_for_split(split);
    }
  }
  // The micro-batch size balance.micro_batches chose, where it divides this run's sequences per
  // replica (another data-parallel degree or global batch may not) and fits in memory.
  BatchLayout layout = target_.batch_layout();
  const int64_t sequences = layout.micro_batches * layout.micro_batch;
  if (settings_.micro_batches != "fixed" && saved.micro_batch > 0 && saved.micro_batch != layout.micro_batch &&
      sequences % saved.micro_batch == 0) {
    const int count = static_cast<int>(sequences / saved.micro_batch);
    const std::vector<int> allowed = target_.allowed_micro_batch_counts(sequences);  // collective
    if (std::find(allowed.begin(), allowed.end(), count) != allowed.end()) {
      print0("balance: resuming with the micro-batches the checkpoint recorded, " + std::to_string(count) + " x " +
             std::to_string(saved.micro_batch));
      micro_batches_now(count, saved.step);
    }
  }
  // The replica shares balance.replicas set, where the replicas and the count are the same.
  if (!settings_.replicas || saved.data != data_ || saved.replica_shares.empty()) return;
  const std::vector<int> shares = int_list(saved.replica_shares);
  layout = target_.batch_layout();
  int64_t total = 0;
  bool in_groups = true;  // interleaved: whole groups of the stages
  for (int n : shares) total += n, in_groups = in_groups && (chunks_ == 1 || n % stages_ == 0);
  if (static_cast<int>(shares.size()) != data_ || total != layout.micro_batches * data_ || shares == layout.shares ||
      !in_groups)
    return;
  print0("balance: resuming with the replica shares the checkpoint recorded, " + saved.replica_shares);
  shares_now(shares, saved.step);
}

}  // namespace trident
