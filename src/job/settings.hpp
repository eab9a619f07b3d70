// The deck read once, at start-up, into typed settings: what the training loop and its helpers
// read instead of looking keys up by name (a typo in a key name is a compile error here, and
// no step pays for a string look-up). The deck stays the record of the run (resolved deck,
// metrics attributes, checkpoint metadata); these structs are what the code runs on.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpointer.hpp"
#include "deck/deck.hpp"
#include "optim/adamw.hpp"

namespace trident {

// [train]: the length and batching of the run.
struct TrainSettings {
  int64_t steps = 0;
  int64_t global_batch = 0;      // sequences per optimizer step, over all replicas
  int micro_batch = 0;           // sequences per micro-batch (B)
  int64_t micro_batches = 0;     // per replica per step: global_batch / (micro_batch · data)
  int seq_len = 0;               // T (model.seq_len)
  uint64_t seed = 0;
  int64_t eval_interval = 0;     // 0: validation only at the start and the end
  int64_t eval_tokens = 0;
  std::string run_dir;
};

// [optim] as the step uses it (AdamW's own constants and the loss scaler have their structs).
struct StepSettings {
  float lr = 0, min_lr = 0;
  int64_t warmup_steps = 0;
  float grad_clip = 0;           // 0: off
  int64_t max_bad_steps = 0;     // skipped steps in a row before the run stops
  bool zero = false;             // ZeRO-1
  std::string schedule;          // parallel.schedule
  optim::AdamWSettings adamw;    // optim.beta1, beta2, eps, weight_decay
};

// [comm] as the data-parallel reducer uses it.
struct ReduceSettings {
  double bucket_mb = 0;          // gradient bucket size
  bool overlap = true;           // reduce buckets while backward runs
};

// [data]
struct DataSettings {
  std::string train, val, format;
  int vocab = 0;                 // model.vocab: tokens must be below it
};

// [debug]: the test hooks of the fault paths (job/fault_hooks.hpp).
struct DebugSettings {
  int fail_rank = -1;
  std::string fail_cite;         // "debug.fail_rank = 2 (command line)": where the fault was asked for
  int64_t fail_step = 0;         // 0: during set-up
  std::string fail_mode;         // fatal | mpi_error | sigkill
  int hang_rank = -1;
  std::vector<int64_t> nan_steps;
  std::vector<std::pair<int, double>> slowdown;  // debug.slowdown: (world rank, factor)
  double slowdown_of(int world_rank) const;      // 1: not slowed
  bool active() const { return fail_rank >= 0 || hang_rank >= 0 || !nan_steps.empty(); }
};

// [balance]: measuring the stages' and replicas' times (issue 18).
struct BalanceSettings {
  int64_t interval = 0;          // steps between measurements; 0: off
  double threshold = 1.15;       // max/min above which a measurement is an imbalance
  bool pipeline = false;         // re-split the pipeline stages when imbalanced
  bool replicas = false;         // uneven micro-batch shares of the data replicas when imbalanced
  double margin = 0.1;           // predicted gain a re-split must exceed
  int64_t cooldown = 50;         // steps after a re-split without another
  std::string micro_batches = "fixed";  // the micro-batch count: fixed, seed (§4.1's rule), model
};

struct RunSettings {
  TrainSettings train;
  StepSettings step;
  ReduceSettings reduce;
  DataSettings data;
  DebugSettings debug;
  BalanceSettings balance;
  ckpt::Settings checkpoint;
  std::string checkpoint_resume;  // checkpoint.resume: none | auto | a file
  bool checkpoint_at_end = true;
  int64_t log_interval = 1;       // metrics.log_interval
};

// Every setting of the run from a validated deck. Pure: no I/O, no MPI.
RunSettings read_settings(const deck::Deck& deck);

// checkpoint.dir, or train.run_dir/checkpoints.
std::string checkpoint_dir(const deck::Deck& deck);
// The checkpoint.* keys as the checkpointer's settings.
ckpt::Settings checkpoint_settings(const deck::Deck& deck);

}  // namespace trident
