// The deck read once, at start-up, into typed settings: what every module below the commands
// reads instead of looking keys up by name (a typo in a key name is a compile error here, and
// no step pays for a string look-up). settings.cpp is the one place that reads a value by key;
// messages cite keys through the deck's Record (deck/record.hpp), which also keeps the resolved
// deck as the record of the run.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpointer.hpp"
#include "model/config.hpp"
#include "comm/group_collectives.hpp"
#include "deck/deck.hpp"
#include "kernels/kernels.hpp"
#include "optim/adamw.hpp"
#include "optim/loss_scaler.hpp"
#include "topo/topology.hpp"

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
  int zero = 0;                  // optim.zero: the ZeRO stage (0, 1, 2)
  std::string schedule;          // parallel.schedule
  optim::AdamWSettings adamw;    // optim.beta1, beta2, eps, weight_decay
};

// [comm] as the data-parallel reducer uses it.
struct ReduceSettings {
  double bucket_mb = 0;          // gradient bucket size
  bool overlap = true;           // reduce buckets while backward runs
  DType grad_dtype = DType::f32; // comm.grad_dtype: what the gradients travel in
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

// [model]
struct ModelSettings {
  int layers = 0, heads = 0, hidden = 0, vocab = 0, seq_len = 0;
  model::Arch arch = model::Arch::gpt2;
  int kv_heads = 0, ffn_hidden = 0;  // llama: resolved (kv_heads = heads where 0; the width rule)
  float rope_theta = 10000.0f, norm_eps = 1e-5f;
  // llama, model.rope_scaling = llama3 (rope_factor 1: none)
  float rope_factor = 1.0f, rope_low_freq_factor = 1.0f, rope_high_freq_factor = 4.0f, rope_original_context = 8192.0f;
  bool tie_embeddings = true;
  std::string init;              // "random", an llm.c model file or a Hugging Face directory
  bool flash_attention = false;  // model.attention = flash
  int classifier_chunk = 0;      // model.classifier_chunk: tokens per chunk; 0: the whole logits
  bool from_file() const { return init != "random"; }
};

// [parallel]
struct ParallelSettings {
  int tensor = 1, pipeline = 1, data = 1;
  std::vector<int64_t> stage_layers;  // blocks per stage as given (empty: even)
  int virtual_stages = 1;             // model chunks per stage (the interleaved 1F1B schedule)
  bool sequence_parallel = false;     // the token rows outside the parallel GEMMs split over tensor
  int context = 1;                    // ranks each replica's sequences are split over (ring attention)
  bool tp_comm_overlap = false;       // sequence parallelism's collectives as rings beside the GEMMs
  std::string hardware;               // parallel.hardware: the profile parallel.layout = auto plans for
  // Rows of each sequence a rank holds: seq_len, or seq_len / context (2 of 2·context chunks).
  int rows_per_sequence(int seq_len) const { return seq_len / context; }
};

// optim.precision and, for fp16, the loss scaler.
struct PrecisionSettings {
  kernels::Precision precision = kernels::Precision::fp32;
  std::string name = "fp32";
  optim::LossScaleSettings loss_scale;  // a fixed optim.loss_scale as a scaler that never moves
};

// [memory]
struct MemorySettings {
  std::string recompute = "none";  // none | selective | every_k | full | auto
  int recompute_interval = 0;
  double budget_gb = 0;            // 0: no budget
};

// [kernels] and [cuda]
struct KernelSettings {
  std::string device = "cpu";      // cpu | cuda | guard
  double guard_memory_gb = 0;
  std::string low16_gemm = "auto"; // auto | native | widened
  kernels::Arithmetic arithmetic = kernels::Arithmetic::native;
  bool graphs = false;             // cuda.graphs
  bool attention_f32 = false;      // cuda.attention_products = f32
  bool gelu_epilogues = true;      // cuda.gelu_epilogues = auto
  bool library_attention = true;   // cuda.attention_kernel = auto
};

// [comm] beyond the reducer's: the collectives (their device staging attached by load_job),
// the requested backend and the heartbeat.
struct CommSettings {
  comm::CollectiveSettings collectives;  // backend resolved (auto → mpi or nccl)
  std::string requested_backend;         // comm.backend as given
  double heartbeat_s = 0, heartbeat_timeout_s = 0;
};

// [train]'s run-directory lock.
struct LockTimes {
  double wait_s = 0, heartbeat_s = 0, stale_s = 0;
};

struct RunSettings {
  ModelSettings model;
  ParallelSettings parallel;
  PrecisionSettings precision;
  MemorySettings memory;
  KernelSettings kernels;
  CommSettings comm;
  topo::TopologySettings topology;
  LockTimes lock;
  TrainSettings train;
  StepSettings step;
  ReduceSettings reduce;
  DataSettings data;
  DebugSettings debug;
  BalanceSettings balance;
  ckpt::Settings checkpoint;
  std::string checkpoint_resume;  // checkpoint.resume: none | auto | a file
  std::string checkpoint_dir_given;  // checkpoint.dir as given (empty: inside the run directory)
  bool checkpoint_at_end = true;
  int64_t log_interval = 1;       // metrics.log_interval
};

// "fp32" | "bf16" | "fp16" (the choices of optim.precision).
kernels::Precision precision_from_name(const std::string& name);

// parallel.layout = auto: the planner chooses the layout (read before anything else of the deck).
bool chooses_layout(const deck::Deck& deck);
// Every setting of the run from a validated deck. No I/O, no MPI; a malformed link
// (topology.link.*) or an unknown comm.backend is a UserError citing the key.
RunSettings read_settings(const deck::Deck& deck);

}  // namespace trident
