// The training loop: micro-batches with gradient accumulation up to the global batch, run by
// the pipeline schedule over the stages (pipeline::PipelineRunner; one stage without pipeline
// parallelism), tensor parallel inside the model, data parallel over the data group (each
// replica its slice of every global batch, gradients summed by comm::GradientReducer), global-norm clipping, AdamW with warm-up and cosine decay, validation every
// train.eval_interval steps and at the end, a console line every metrics.log_interval steps,
// every step's figures in metrics.h5, and the final model as an llm.c file in the run directory.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpointer.hpp"
#include "ckpt/lineage.hpp"
#include "comm/group_collectives.hpp"
#include "dp/parameter_shards.hpp"
#include "dp/reducer.hpp"
#include "data/token_data.hpp"
#include "kernels/kernels.hpp"
#include "metrics/metrics_file.hpp"
#include "metrics/progress.hpp"
#include "model/transformer.hpp"
#include "optim/adamw.hpp"
#include "optim/loss_scaler.hpp"
#include "pipeline/micro_batching.hpp"
#include "pipeline/runner.hpp"
#include "job/fault_hooks.hpp"
#include "job/job.hpp"
#include "job/memory_plan.hpp"
#include "train/balancer.hpp"
#include "train/run_collectives.hpp"
#include "train/step_figures.hpp"
#include "train/step_log.hpp"
#include "train/step_result.hpp"

namespace trident {

class Trainer : private BalanceTarget {
 public:
  // Checks the data and the model source and builds the model and optimizer; writes nothing.
  // Every problem with the input is a UserError (before the run directory exists). Collective
  // over `world`, the job's control communicator (comm/world.hpp: the checkpoints' files, the
  // memory checks), and over every group of `groups`; both outlive the trainer.
  Trainer(const Job& job, comm::Communicator& world, const comm::JobGroups& groups);
  // The memory model's estimate for this run ("parameters 0.8 MiB, …"), or its bytes
  // ("memory_estimate_bytes: parameters=… total=…").
  std::string memory_report(bool bytes) const;
  // Collective, before the run directory is prepared: restores the state of the checkpoint
  // checkpoint.resume names or finds. A missing, corrupt or mismatching checkpoint named
  // explicitly is a UserError, so that a rejected resume leaves nothing behind.
  // checking: --check (says "would resume from"). run_id: this run's (the same on every rank),
  // recorded in its checkpoints and metrics.h5 with the lineage it extends.
  void restore(const std::string& run_id, bool checking = false);
  // Trains (from the restored step), writing metrics.h5,
  // checkpoints and model.bin into run_dir. Returns kExitOk, or kExitStopped after a stop
  // signal and its full checkpoint.
  // `facts`: what the job recorded of its start (threads, …), kept in metrics.h5 with the deck.
  int run(const std::string& run_dir, const std::vector<std::pair<std::string, std::string>>& facts = {});

 private:
  StepResult train_step(int64_t step);
  // The parts of the run with a section of their own in a checkpoint (ckpt/stateful.hpp): the
  // balancer and, with fp16, the loss scaler. The trainer's own section is TrainingState.
  std::vector<ckpt::Stateful*> stateful_parts();
  void restore_training_state(const ckpt::TrainingState& saved, const std::string& path);
  double evaluate();
  // This rank's rows of a micro-batch: fill(T, inputs, targets) writes B sequences of T tokens
  // (with context parallelism the whole ones, of which this rank's chunks are taken).
  void fill_rows(int32_t* inputs, int32_t* targets, const std::function<void(int, int32_t*, int32_t*)>& fill);
  void record_step(int64_t step, const StepResult& result);
  void print_summary() const;
  // Pipeline: a value of the last stage, to every stage (so that rank 0 can report it).
  double from_last_stage(double value);
  // Collective over the data group: every replica must hold bitwise the same parameters.
  void check_replicas_agree();
  // Checkpoints (ckpt/): this rank's part of the state, the metadata, restore, and the
  // step-boundary decision all ranks take together.
  ckpt::StateView state_view();  // where the state lives (its device)
  // The parameters from this rank's slice of fp32 values in host memory: the model's (rounded
  // to its type) and, for a 16-bit model, the optimizer's master (its shard's part).
  void set_parameters(const std::vector<float>& host_slice);
  void initialise_parameters();  // from the deck (model.init or the seed)
  // ZeRO-3: the owned ranges' values (state order) into the shard and the optimizer's master.
  void load_owned(const float* owned_values);
  // After a checkpoint was read into state_view(): a 16-bit model's parameters made from the
  // master that was read (each replica its shard, then gathered).
  void state_was_read();
  // This rank's slice of the fp32 parameters in host memory on data replica 0, empty on the
  // others: an fp32 model's own; a 16-bit model's master and ZeRO-3's shard, each replica's
  // owned ranges sent to replica 0 (collective over the data group).
  std::vector<float> master_on_data_root();
  // ZeRO-3, after the own parameters changed: the tensors outside the blocks gathered (and their
  // f32 reads made again), the blocks to be gathered anew.
  void shards_changed();
  // The optimizer's part of a step, decided on the device (loss, norm, clip, skip: the step's
  // scalars); returns them as the host's one read of the step gives them (kernels::StepScalar).
  const double* finish_step_on_device(double fp16_scale, float lr);
  ckpt::Metadata metadata(int64_t completed_steps);
  // Collective at the end of step `completed` (1-based): a checkpoint if one is due; true
  // when a stop signal reached any rank (a full checkpoint has been written then).
  bool checkpoint_boundary(int64_t completed);
  std::vector<ckpt::WriteRecord> record_checkpoints();  // into metrics.h5 (rank 0)
  void check_final_checkpoint() const;  // RunFailure (exit 1) if the last step's full checkpoint failed
  // Collective: rank 0's `problem` (a file of the run directory not written) as a RunFailure
  // (exit 1) on every rank, with `hint`; nothing when it is empty.
  void end_if_root_failed(std::string problem, const std::string& hint) const;
  // The balancer's target (train/trainer_balance.cpp): the run's batching, read and changed.
  BatchLayout batch_layout() const override;
  std::vector<int> allowed_micro_batch_counts(int64_t sequences) override;
  std::string memory_shortfall_anywhere(const std::vector<int>& split, int micro_batch, int64_t micro_batches) override;
  void apply_shares(const std::vector<int>& shares) override;
  // The runner and the activations rebuilt for the new micro-batch size (equal shares again).
  void apply_micro_batches(int count) override;
  // The state through a scratch checkpoint file in the run directory, read back resharded.
  bool move_blocks(const std::vector<int>& split, int64_t completed) override;
  void build_for_split(const std::vector<int>& split) override { rebuild_model(split); }
  // Rebuilds the model, reducer, optimizer and runner for `split` (their state is not kept).
  void rebuild_model(const std::vector<int>& split);
  // Rebuilds the runner (and the model's activations) for micro_batches_ of B_, this replica's share.
  void rebuild_runner();
  // Counts a skipped step; stops the run (RunFailure) past optim.max_bad_steps in a row.
  void count_bad_step(int64_t step, const StepResult& result);

  const Job& job_;
  const RunSettings& settings_;  // job_.settings
  comm::Communicator& world_;  // the control communicator over every rank (not collectives_.world)
  // Built in declaration order, each from the ones above it: the collectives first (the model,
  // the reducer and the runner hold references into them), then the data, the memory decision
  // (checked before the model's first buffer), the model, and what works on the model.
  RunCollectives collectives_;
  const int rank_;  // in the world
  const int dp_rank_, dp_size_, pp_rank_, pp_size_;
  const std::unique_ptr<data::TokenData> train_data_, val_data_;
  const int64_t val_windows_;
  const model::GptConfig config_;
  const RecomputeChoice recompute_;  // memory.recompute, or auto by the budget; the memory checked
  kernels::Context ctx_;
  // The model and what works on it are rebuilt, in this order, when balance.pipeline moves
  // blocks between stages (rebuild_model): the only members that change after construction.
  std::vector<int> split_;  // blocks per virtual stage (per stage when v = 1): the deck's, or the last move's
  std::unique_ptr<model::Transformer> model_;
  const std::unique_ptr<optim::LossScaler> loss_scaler_;  // fp16 only
  std::unique_ptr<dp::GradientReducer> reducer_;
  std::unique_ptr<dp::ParameterShards> shards_;  // ZeRO-3's; null otherwise
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<pipeline::PipelineRunner> runner_;
  const std::unique_ptr<FaultHooks> hooks_;  // null unless a debug.* key asks for a fault
  // Sequences per micro-batch and micro-batches per step of a replica (equal shares): the
  // deck's, or balance.micro_batches' last choice; their product is fixed.
  int B_;
  const int T_;        // rows of each sequence this rank holds: seq_len, or seq_len / context
  const int seq_len_;  // model.seq_len
  // Context parallelism: the ranks each replica's sequences are split over, and this rank's
  // replica (which sequences it reads); 1 and dp_rank_ without.
  const int context_, replica_;
  std::vector<int32_t> sequences_;  // context parallelism: a micro-batch's whole sequences, host
  const int64_t steps_;
  int64_t micro_batches_;
  const double flops_per_token_;
  StepFigureLog figures_;
  Balancer balancer_;  // the load-balance state: its measurement and decisions (train/balancer.hpp)

  const ModelMemory memory_;  // the memory this rank's model shares with others (the memory checks of balance moves)

  // The state of the run.
  StepLog log_;  // metrics.h5 and the console lines (rank 0; closed elsewhere)
  std::unique_ptr<ckpt::Checkpointer> checkpointer_;
  std::string run_id_;
  ckpt::Lineage lineage_;          // rank 0: what this run continues (ckpt/lineage.hpp)
  int64_t start_step_ = 0;         // 0, or the step a checkpoint resumed at
  int64_t last_full_step_ = -1;    // of the newest full checkpoint written or resumed from
  ckpt::WriteRecord final_full_;   // the full checkpoint of the last step, once attempted (path empty: not yet)
  int64_t optimizer_updates_ = 0;  // AdamW updates made (AdamW's t)
  int64_t bad_in_a_row_ = 0, skipped_steps_ = 0;
  std::string run_dir_;            // run()'s
  // Micro-batches per step of each data replica (balance.replicas; else micro_batches_ each),
  // and the first of this replica's within the global batch's micro-batches.
  std::vector<int> shares_;
  int64_t first_micro_batch_ = 0;
  Buffer<double> step_scalars_;   // (kernels::kStepScalars) on the model's device
  std::array<double, kernels::kStepScalars> step_scalars_host_{};  // their one read per step
};

}  // namespace trident
