// The training loop: micro-batches with gradient accumulation up to the global batch, run by
// the pipeline schedule over the stages (pipeline::PipelineRunner; one stage without pipeline
// parallelism), tensor parallel inside the model, data parallel over the data group (each
// replica its slice of every global batch, gradients summed by comm::GradientReducer), global-norm clipping, AdamW with warm-up and cosine decay, validation every
// train.eval_interval steps and at the end, a console line every metrics.log_interval steps,
// every step's figures in metrics.h5, and the final model as an llm.c file in the run directory.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "ckpt/checkpointer.hpp"
#include "comm/groups.hpp"
#include "comm/reducer.hpp"
#include "data/token_data.hpp"
#include "kernels/kernels.hpp"
#include "metrics/metrics_file.hpp"
#include "metrics/progress.hpp"
#include "model/gpt2.hpp"
#include "optim/adamw.hpp"
#include "optim/loss_scaler.hpp"
#include "pipeline/runner.hpp"
#include "train/job.hpp"
#include "train/memory_plan.hpp"

namespace trident {

struct StepResult {
  float loss = 0, lr = 0, grad_norm = 0;
  double seconds = 0;
  double comm_seconds = 0, exposed_comm_seconds = 0;  // data-parallel reduction
  double optimizer_seconds = 0;                       // gradient norm, AdamW, ZeRO all-gather
  pipeline::StepTimes pipeline;                       // this stage's compute and waiting
  bool skipped = false;  // NaN/Inf in the loss or the gradients: no update made
  double loss_scale = 1;  // fp16: the loss scale the step ran with
};

// checkpoint.dir, or train.run_dir/checkpoints.
std::string checkpoint_dir(const deck::Deck& deck);
// The checkpoint.* keys as the checkpointer's settings.
ckpt::Settings checkpoint_settings(const deck::Deck& deck);

class Trainer {
 public:
  // Checks the data and the model source and builds the model and optimizer; writes nothing.
  // Every problem with the input is a UserError (before the run directory exists).
  Trainer(const Job& job, const comm::ProcessGroups& groups);
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
  int run(const std::string& run_dir);

 private:
  StepResult train_step(int64_t step);
  void restore_precision_state(const ckpt::Metadata& saved, const std::string& path);
  double evaluate();
  void record_step(int64_t step, const StepResult& result);
  void record_rank_figures(const StepResult& result);  // collective over MPI_COMM_WORLD
  void print_summary() const;
  void record_validation(int64_t step, double loss);
  // Pipeline: the first and last stage both hold wte (tied); their gradients add up.
  void tie_embedding_gradients();
  // Pipeline: a value of the last stage, to every stage (so that rank 0 can report it).
  double from_last_stage(double value);
  // The norm of the summed gradients, and the clipping factor (collective with ZeRO-1).
  // The global norm of the gradients divided by gradient_scale (fp16's loss scale), and the
  // factor that clips it.
  optim::GradNorm global_grad_norm(float clip, double gradient_scale);
  // Collective over the data group: every replica must hold bitwise the same parameters.
  void check_replicas_agree();
  // Checkpoints (ckpt/): this rank's part of the state, the metadata, restore, and the
  // step-boundary decision all ranks take together.
  ckpt::StateView state_view();
  ckpt::Metadata metadata(int64_t completed_steps) const;
  // Collective at the end of step `completed` (1-based): a checkpoint if one is due; true
  // when a stop signal reached any rank (a full checkpoint has been written then).
  bool checkpoint_boundary(int64_t completed);
  std::vector<ckpt::WriteRecord> record_checkpoints();  // into metrics.h5 (rank 0)
  void check_final_checkpoint() const;  // RunFailure (exit 1) if the last step's full checkpoint failed
  // Collective: rank 0's `problem` (a file of the run directory not written) as a RunFailure
  // (exit 1) on every rank, with `hint`; nothing when it is empty.
  void end_if_root_failed(std::string problem, const std::string& hint) const;
  // Counts a skipped step; stops the run (RunFailure) past optim.max_bad_steps in a row.
  void count_bad_step(int64_t step, const StepResult& result);

  const Job& job_;
  const comm::ProcessGroups& groups_;
  int dp_rank_ = 0, dp_size_ = 1, pp_rank_ = 0, pp_size_ = 1;
  std::unique_ptr<comm::GroupCollectives> world_collectives_;     // step-boundary agreements
  std::unique_ptr<comm::GroupCollectives> pipeline_collectives_;  // before runner_, which uses it
  std::unique_ptr<comm::GroupCollectives> embedding_collectives_;  // first and last stage only
  std::unique_ptr<pipeline::PipelineRunner> runner_;
  std::vector<double> bubble_busy_, bubble_wait_;  // per stage, summed over steps (rank 0)
  std::array<double, 3> level_totals_{};            // bytes per level over the run (rank 0)
  std::array<double, static_cast<int>(MemoryCategory::Count)> memory_peaks_{};  // (rank 0)
  std::unique_ptr<comm::GroupCollectives> tensor_collectives_;  // before model_, which uses it
  std::unique_ptr<comm::GroupCollectives> data_collectives_;  // before reducer_, which uses it
  std::unique_ptr<comm::GradientReducer> reducer_;
  std::array<comm::LevelBytes, 3> last_group_bytes_{};  // data, tensor, pipeline: up to the last step
  kernels::Context ctx_;
  std::unique_ptr<model::Gpt2> model_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<data::TokenData> train_data_, val_data_;
  std::unique_ptr<metrics::MetricsFile> metrics_;
  std::unique_ptr<metrics::RunProgress> progress_;  // rank 0: ETA and the end-of-run totals
  double peak_tflops_ = 0;                          // rank 0: the measured GEMM peak, for MFU
  RecomputeChoice recompute_;
  std::unique_ptr<ckpt::Checkpointer> checkpointer_;
  std::string run_id_;
  ckpt::Lineage lineage_;          // rank 0: what this run continues (ckpt/lineage.hpp)
  int64_t start_step_ = 0;         // 0, or the step a checkpoint resumed at
  int64_t last_full_step_ = -1;    // of the newest full checkpoint written or resumed from
  ckpt::WriteRecord final_full_;   // the full checkpoint of the last step, once attempted (path empty: not yet)
  int64_t optimizer_updates_ = 0;  // AdamW updates made (AdamW's t)
  int64_t bad_in_a_row_ = 0, skipped_steps_ = 0;
  std::unique_ptr<optim::LossScaler> loss_scaler_;  // fp16 only
  int64_t steps_ = 0, micro_batches_ = 0, val_windows_ = 0;
  int B_ = 0, T_ = 0;
  double flops_per_token_ = 0;
};

}  // namespace trident
