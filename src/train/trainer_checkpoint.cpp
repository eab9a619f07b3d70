// The trainer's side of checkpoints: what this rank contributes, restoring (possibly onto
// another layout), the collective decision at each step boundary, stop signals, and skipped
// steps.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "ckpt/resume.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/version.hpp"
#include "job/model_setup.hpp"
#include "job/signals.hpp"
#include "train/trainer.hpp"

namespace trident {
namespace {

std::string layout_text(int64_t tensor, int64_t pipeline, int64_t data, int64_t zero) {
  return "(tensor " + std::to_string(tensor) + ", pipeline " + std::to_string(pipeline) + ", data " +
         std::to_string(data) + (zero ? ", ZeRO-" + std::to_string(zero) + ")" : ")");
}

}  // namespace

// Parameters, the fp32 master weights: an fp32 model's own, written by data replica 0; a 16-bit
// model's are the optimizer's, with ZeRO each replica writing its own shard. Moments: with ZeRO
// each replica its own shard, without it replica 0 (every replica holds them all).
ckpt::StateView Trainer::state_view() {
  ckpt::StateView view;
  view.config = model_->config();
  view.part = model_->partition();
  if (optimizer_->keeps_master()) {
    view.params = optimizer_->master();
    view.params_ranges = optimizer_->owned();
    view.params_owner = settings_.step.zero || dp_rank_ == 0;
  } else if (shards_) {  // an fp32 ZeRO-3 model: its shard is the master
    view.params = shards_->shard().as<float>();
    view.params_ranges = optimizer_->owned();
    view.params_owner = true;
  } else {
    view.params = model_->parameters_to_write().as<float>();
    view.params_owner = dp_rank_ == 0;
  }
  view.m = optimizer_->m();
  view.v = optimizer_->v();
  view.moments_ranges = optimizer_->owned();
  view.moments_owner = settings_.step.zero || dp_rank_ == 0;
  view.copies.backend = model_->context().backend;  // the copies are no operations to time (op_times)
  view.copies.stream = model_->context().stream;
  return view;
}

std::vector<ckpt::Stateful*> Trainer::stateful_parts() {
  std::vector<ckpt::Stateful*> parts = {&balancer_};
  if (loss_scaler_) parts.push_back(loss_scaler_.get());
  return parts;
}

// The file's own attributes (the model, the layout, who wrote it), the trainer's section, then
// each part's.
ckpt::Metadata Trainer::metadata(int64_t completed_steps) {
  const layout::Grid& grid = job_.grid;
  ckpt::Metadata m;
  m.model = model_->config();
  static_cast<ckpt::LayoutRecord&>(m) = {grid.tp_size(), grid.pp_size(), grid.dp_size(), settings_.step.zero};
  static_cast<ckpt::Provenance&>(m) = {TRIDENT_VERSION, utc_timestamp(),
                                       job_.record.to_ini("resolved deck of the run that wrote this checkpoint")};
  static_cast<ckpt::TrainingState&>(m) = {completed_steps,
                                          completed_steps * settings_.train.global_batch * seq_len_,
                                          optimizer_updates_,
                                          bad_in_a_row_,
                                          skipped_steps_,
                                          static_cast<int64_t>(settings_.train.seed),
                                          kernels::precision_name(model_->precision())};
  for (const ckpt::Stateful* part : stateful_parts()) part->save(m);
  return m;
}

// The trainer's section. The parameters in a checkpoint are fp32 master weights whatever the
// precision, so any run can continue any other (fp16's loss scaler, a part of its own, continues
// where it was when both runs are fp16).
void Trainer::restore_training_state(const ckpt::TrainingState& saved, const std::string& path) {
  start_step_ = saved.step;
  optimizer_updates_ = saved.optimizer_updates;
  bad_in_a_row_ = saved.bad_steps_in_a_row;
  skipped_steps_ = saved.skipped_steps;
  const std::string now = kernels::precision_name(model_->precision());
  if (saved.precision != now)
    print0("note: " + path + " was written by an optim.precision = " + saved.precision + " run; this one continues "
           "in " + now + " from its fp32 master weights");
  if (saved.seed != static_cast<int64_t>(settings_.train.seed))
    print0("warning: train.seed is " + std::to_string(settings_.train.seed) + ", the checkpoint's run used " +
           std::to_string(saved.seed) + ": the batches from here on differ from that run's");
}

void Trainer::restore(const std::string& run_id, bool checking) {
  const deck::Record& deck = job_.record;
  run_id_ = run_id;
  ckpt::Start start = ckpt::choose_checkpoint(settings_.checkpoint_resume, settings_.checkpoint.dir, run_id,
                                              world_);
  lineage_ = std::move(start.lineage);
  const auto& chosen = start.chosen;
  if (!chosen) return;
  const ckpt::Metadata& saved = chosen->metadata;
  const model::GptConfig& config = model_->config();
  const model::GptConfig& theirs = saved.model;
  if (theirs.layers != config.layers || theirs.heads != config.heads || theirs.channels != config.channels ||
      theirs.vocab != config.vocab || theirs.padded_vocab != config.padded_vocab ||
      theirs.max_seq_len != config.max_seq_len || theirs.arch != config.arch ||
      model::kv_heads(theirs) != model::kv_heads(config) || model::mlp_hidden(theirs) != model::mlp_hidden(config) ||
      model::tied_head(theirs) != model::tied_head(config))
    fatal_all(chosen->path + " holds a " + model::arch_name(theirs.arch) + " model with layers " +
              std::to_string(theirs.layers) + ", heads " + std::to_string(theirs.heads) + " (key/value " +
              std::to_string(model::kv_heads(theirs)) + "), hidden " + std::to_string(theirs.channels) + ", vocab " +
              std::to_string(theirs.vocab) + ", seq_len " + std::to_string(theirs.max_seq_len) +
              "; the deck asks for a " + model::arch_name(config.arch) + " model with layers " +
              std::to_string(config.layers) + ", heads " + std::to_string(config.heads) + " (key/value " +
              std::to_string(model::kv_heads(config)) + "), hidden " + std::to_string(config.channels) + ", vocab " + std::to_string(config.vocab) +
              ", seq_len " + std::to_string(config.max_seq_len) + " (" + deck.cite("checkpoint.resume") +
              "); resume with the model.* keys it was written with, or start anew with checkpoint.resume = none");
  if (saved.step > steps_)
    fatal_all(chosen->path + " is at step " + std::to_string(saved.step) + ", beyond train.steps = " +
              std::to_string(steps_) + " (" + deck.cite("train.steps") + "); raise train.steps to train further");
  for (ckpt::Stateful* part : stateful_parts()) part->restore(saved, chosen->path);  // the balancer may rebuild the model
  ckpt::StateView view = state_view();
  if (saved.kind == "fast") {
    view.m = view.v = nullptr;  // AdamW's moments stay zero, as at the start of a run
    print0("warning: " + chosen->path + " is a fast checkpoint (parameters only): the AdamW moments "
           "start again from zero, so the steps after it differ from the uninterrupted run's");
  }
  const std::string problem = ckpt::read_checkpoint(chosen->path, world_, view);
  if (!problem.empty()) fatal_all("resuming from " + chosen->path + ": " + problem);
  state_was_read();
  last_full_step_ = saved.kind == "full" ? saved.step : -1;
  restore_training_state(saved, chosen->path);
  check_replicas_agree();  // every replica restored the same bits
  const std::string now = layout_text(job_.grid.tp_size(), job_.grid.pp_size(), job_.grid.dp_size(),
                                      settings_.step.zero);
  const std::string then = layout_text(saved.tensor, saved.pipeline, saved.data, saved.zero);
  print0(std::string(checking ? "would resume from " : "resumed from ") + chosen->path + " (" + saved.kind +
         ", step " + std::to_string(saved.step) + ", written " + saved.written_at + " by layout " + then + ")" +
         (then == now ? "" : "; resharded onto " + now));
}

bool Trainer::checkpoint_boundary(int64_t completed) {
  // Any rank's signal or clock decides for all: one small all-reduce per step.
  const std::string due = checkpointer_->due(completed);
  double flags[3] = {double(stop_signal()), double(due == "fast"), double(due == "full")};
  collectives_.world->all_reduce(flags, 3, DType::f64, comm::Op::Max, Stream{}).wait();
  const int signal = static_cast<int>(flags[0]);
  const bool stop = signal != 0;
  const std::string kind = stop || flags[2] != 0 ? "full" : flags[1] != 0 ? "fast" : "";
  if (!kind.empty()) {
    if (log_.metrics()) log_.metrics()->sync();  // rows up to this step on disk before the checkpoint names it
    checkpointer_->save(kind, state_view(), metadata(completed));
    if (kind == "full") last_full_step_ = completed;
  }
  if (stop) checkpointer_->wait();  // the stop checkpoint written before the ranks exit
  const std::vector<ckpt::WriteRecord> records = record_checkpoints();
  if (!kind.empty() && log_.metrics()) log_.metrics()->flush();
  if (!stop) return false;
  if (records.empty() || !records.back().error.empty())
    throw RunFailure(std::string("stopped by ") + stop_signal_name(signal) + " after step " + std::to_string(completed) +
                         ", but its checkpoint could not be written",
                     kExitFault);
  print0(std::string("stopped by ") + stop_signal_name(signal) + " after step " + std::to_string(completed) + ": wrote " +
         records.back().path + "; continue with --checkpoint.resume=auto (exit status 3)");
  return true;
}

std::vector<ckpt::WriteRecord> Trainer::record_checkpoints() {
  const std::vector<ckpt::WriteRecord> records = checkpointer_->take_records();
  for (const ckpt::WriteRecord& r : records) {
    if (r.kind == "full" && r.step == steps_) final_full_ = r;  // the same on every rank
    if (!log_.metrics()) continue;
    log_.metrics()->append_int("checkpoint/step", r.step);
    log_.metrics()->append_int("checkpoint/full", r.kind == "full" ? 1 : 0);
    log_.metrics()->append_int("checkpoint/ok", r.error.empty() ? 1 : 0);
    log_.metrics()->append("checkpoint/bytes", static_cast<double>(r.bytes));
    log_.metrics()->append("checkpoint/write_s", r.write_seconds);
    log_.metrics()->append("checkpoint/verify_s", r.verify_seconds);
    log_.metrics()->append("checkpoint/gb_per_s", r.bytes / 1e9 / std::max(r.write_seconds, 1e-9));
    log_.metrics()->append("checkpoint/blocking_ms", r.blocking_seconds * 1e3);
  }
  return records;
}

// A run whose last checkpoint was refused (a full disk) must not end as a success: a job script
// would take the run as done while nothing it could resume from holds the last steps. Called on
// every rank after model.bin and metrics.h5 are written, which are still worth having.
void Trainer::check_final_checkpoint() const {
  if (final_full_.path.empty() || final_full_.error.empty()) return;
  throw RunFailure("training finished, but its final checkpoint " + final_full_.path + " (step " +
                       std::to_string(final_full_.step) + ") was not written: " + final_full_.error +
                       "; model.bin and metrics.h5 are written. Free space for it and run again with "
                       "--checkpoint.resume=auto, which redoes the steps after the newest checkpoint written",
                   kExitFault);
}

void Trainer::count_bad_step(int64_t step, const StepResult& result) {
  ++skipped_steps_;
  ++bad_in_a_row_;
  const int64_t limit = settings_.step.max_bad_steps;
  if (bad_in_a_row_ <= limit) return;
  checkpointer_->wait();
  if (log_.metrics()) log_.metrics()->flush();
  char values[96];
  std::snprintf(values, sizeof values, "loss %g, gradient norm %g", result.loss, result.grad_norm);
  throw RunFailure(std::to_string(bad_in_a_row_) + " steps in a row up to step " + std::to_string(step + 1) +
                       " had NaN or Inf in the loss or the gradients (" + values + "), more than " +
                       job_.record.cite("optim.max_bad_steps") +
                       "; the checkpoints written so far are intact. Lower optim.lr, set optim.grad_clip, "
                       "or resume from the last checkpoint",
                   kExitFault);
}

}  // namespace trident
