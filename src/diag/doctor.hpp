// `trident doctor`: the seed's troubleshooting table (§5.1) as rules over the figures of one or
// more runs' metrics.h5. Each rule looks at a symptom, and when it is there names the cause the
// seed gives, the figures that triggered it and the remedy in deck keys.
//
//   symptom (seed §5.1)                        figures                                  remedy
//   throughput fluctuating, GPU waiting         exposed DP communication share, tokens/s   comm.overlap, buckets,
//                                               variation                                  hierarchical all-reduce
//   throughput falling as ranks are added       tokens/s of runs of different world size   ring / hierarchy, not
//                                                                                          flat or central reduction
//   out of memory (close to the budget)         peak tracked bytes per rank vs budget      activation recompute
//   NaN loss                                    skipped steps, loss-scale events           gradient clipping, bf16
// and ours: pipeline stages idle (bubble, §4.1) → more micro-batches per step; checkpoints
// blocking training (§4.2) → asynchronous writes or a longer interval; checkpoint writes that
// failed → room in the checkpoint directory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trident::diag {

// What the rules read from one run (metrics.h5 series after the first, warm-up step).
struct RunFigures {
  std::string dir;
  std::map<std::string, std::string> deck;  // every deck key's value (metrics.h5 attributes)
  int world = 1, pipeline = 1, micro_batches = 1;  // micro-batches per step on a replica
  std::vector<double> tokens_per_s, step_ms, comm_exposed_ms;  // per step
  std::vector<double> bubble_share;  // per step: the stages' idle share of the pipeline phase (mean)
  std::string schedule = "1f1b";     // parallel.schedule
  double schedule_bubble = 0;        // its own bubble with the stages' measured pass times (pipeline::implied_bubble)
  std::vector<int64_t> skipped_steps;       // step numbers skipped for NaN/Inf
  int64_t loss_scale_events = 0;            // fp16 loss-scale reductions ("loss_scale" series)
  double peak_bytes_per_rank = 0;           // Σ over categories of the busiest rank's peak
  double budget_bytes = 0;                  // per rank; 0: the memory rule is not checked
  std::string budget_source;                // where the budget comes from
  int64_t steps = 0;
  double step_ms_total = 0;                 // all steps, as recorded
  double checkpoint_blocking_ms = 0;        // all checkpoint writes: what training waited
  int64_t checkpoints = 0, failed_checkpoints = 0;
};

struct Finding {
  std::string rule;      // short name, e.g. "communication blocking"
  std::string evidence;  // the figures that triggered it
  std::string remedy;    // what to change, in deck keys
};

struct Thresholds {
  double exposed_share = 0.20;       // exposed communication / step time
  double fluctuation_cv = 0.15;      // coefficient of variation of tokens/s
  double fluctuation_exposed = 0.10; // exposed share that, with fluctuation, counts too
  double memory_fraction = 0.90;     // peak / budget
  double bubble_share = 0.25;        // idle / pipeline phase
  double scaling_drop = 0.95;        // bigger run below this × the smaller run's tokens/s
  double checkpoint_share = 0.05;    // checkpoint blocking time / training time
};

// The findings over the runs (several runs: also the scaling rule across them). `checked` receives one line per rule saying
// what it looked at (so a clean report still shows the figures).
std::vector<Finding> diagnose(const std::vector<RunFigures>& runs, const Thresholds& limits,
                              std::vector<std::string>& checked);

}  // namespace trident::diag
