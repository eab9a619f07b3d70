// The rules of `trident doctor`.
#include "diag/doctor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "core/clock.hpp"

namespace trident::diag {
namespace {

double variation(const std::vector<double>& values) {  // standard deviation / mean
  if (values.size() < 2) return 0.0;
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  double squares = 0.0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return mean > 0 ? std::sqrt(squares / (values.size() - 1)) / mean : 0.0;
}

std::string format(const char* pattern, double a, double b = 0, double c = 0, double d = 0) {
  char text[256];
  std::snprintf(text, sizeof text, pattern, a, b, c, d);
  return text;
}

std::string key(const RunFigures& run, const std::string& name) {
  const auto it = run.deck.find(name);
  return it == run.deck.end() ? "" : it->second;
}

std::string label(const RunFigures& run, size_t runs) { return runs > 1 ? run.dir + ": " : ""; }

void communication_rule(const RunFigures& run, size_t runs, const Thresholds& limits, std::vector<Finding>& out,
                        std::vector<std::string>& checked) {
  const double step = median(run.step_ms), exposed = median(run.comm_exposed_ms);
  const double share = step > 0 ? exposed / step : 0.0, cv = variation(run.tokens_per_s);
  const std::string figures = format("exposed data-parallel communication %.1f%% of the step (median %.2f of %.2f ms), "
                                     "tokens/s varies by %.1f%% (coefficient of variation)",
                                     100 * share, exposed, step, 100 * cv);
  checked.push_back(label(run, runs) + "communication blocking: " + figures);
  if (share < limits.exposed_share && !(cv >= limits.fluctuation_cv && share >= limits.fluctuation_exposed)) return;
  // A remedy never suggests the setting in force.
  std::string remedy;
  if (key(run, "comm.overlap") == "false") remedy += "set comm.overlap = true, so that buckets reduce during backward; ";
  remedy += "try a smaller comm.bucket_mb (now " + key(run, "comm.bucket_mb") + ") so the first buckets start earlier";
  if (key(run, "comm.algo") != "hierarchical")
    remedy += ", and comm.algo = hierarchical (now " + key(run, "comm.algo") + ") so less crosses the slow links";
  remedy += "; `trident commbench` measures each level";
  out.push_back({"communication blocking (seed §5.1: fluctuating utilisation)", label(run, runs) + figures, remedy});
}

void memory_rule(const RunFigures& run, size_t runs, const Thresholds& limits, std::vector<Finding>& out,
                 std::vector<std::string>& checked) {
  const double budget = run.budget_bytes;
  if (budget <= 0) {
    checked.push_back(label(run, runs) + "memory: no budget to compare with (give --budget_gb)");
    return;
  }
  const double fraction = run.peak_bytes_per_rank / budget;
  const std::string figures = format("peak tracked memory %.1f MiB per rank, %.0f%% of the %.1f MiB budget",
                                     run.peak_bytes_per_rank / 1048576.0, 100 * fraction, budget / 1048576.0) +
                              " (" + run.budget_source + ")";
  checked.push_back(label(run, runs) + "memory: " + figures);
  if (fraction < limits.memory_fraction) return;
  const std::string recompute = key(run, "memory.recompute");
  std::string remedy = recompute == "none" || recompute.empty()
                           ? "enable activation recompute: memory.recompute = selective (attention only), every_k or "
                             "full (now none)"
                           : "recompute is already " + recompute + "; use " +
                                 (key(run, "optim.zero") == "1" ? "" : "optim.zero = 1, ") +
                                 "more pipeline stages or tensor parallelism";
  out.push_back({"memory close to the budget (seed §5.1: out of memory)", label(run, runs) + figures, remedy});
}

void nan_rule(const RunFigures& run, size_t runs, std::vector<Finding>& out, std::vector<std::string>& checked) {
  std::string steps;
  for (size_t i = 0; i < run.skipped_steps.size() && i < 8; ++i) steps += (i ? ", " : "") + std::to_string(run.skipped_steps[i]);
  if (run.skipped_steps.size() > 8) steps += ", …";
  const std::string figures = std::to_string(run.skipped_steps.size()) + " of " + std::to_string(run.steps) +
                              " steps skipped for NaN/Inf" + (steps.empty() ? "" : " (steps " + steps + ")") + ", " +
                              std::to_string(run.loss_scale_events) + " loss-scale reductions";
  checked.push_back(label(run, runs) + "NaN: " + figures);
  if (run.skipped_steps.empty() && run.loss_scale_events == 0) return;
  // fp16 overflows that the loss scaler absorbed are a start-up cost, not divergence: the remedy
  // is the scaler's start, or bf16's range.
  const bool fp16 = key(run, "optim.precision") == "fp16";
  const std::string remedy =
      fp16 ? "start the loss scale lower: optim.initial_loss_scale (now " + key(run, "optim.initial_loss_scale") +
                 "), or tolerate more overflows with optim.hysteresis (now " + key(run, "optim.hysteresis") +
                 "); or train in bf16 (fp32's range, no loss scale); if skips continue at a low scale, lower optim.lr (now " +
                 key(run, "optim.lr") + ")"
           : "lower the clipping threshold optim.grad_clip (now " + key(run, "optim.grad_clip") + ") or optim.lr (now " +
                 key(run, "optim.lr") + ")";
  out.push_back({std::string(fp16 ? "fp16 overflows: steps skipped while the loss scale came down"
                                  : "NaN or Inf in the loss or the gradients (seed §5.1: exploding gradients)"),
                 label(run, runs) + figures, remedy});
}

// Idle pipeline stages: the schedule's own bubble (1F1B's (p−1)/(m+p−1), less for ZB-H1) when
// that is what is measured, else stages waiting on each other beyond it (unequal stages,
// point-to-point latency).
void bubble_rule(const RunFigures& run, size_t runs, const Thresholds& limits, std::vector<Finding>& out,
                 std::vector<std::string>& checked) {
  if (run.pipeline <= 1) return;
  const double share = median(run.bubble_share);
  const double theory = run.schedule_bubble;
  const std::string figures =
      format("the pipeline stages stand idle %.1f%% of the pipeline phase (median over steps, mean of stages); "
             "the schedule's bubble with these stage times is %.1f%%",
             100 * share, 100 * theory) +
      " (" + run.schedule + ")" +
      " (p = " + std::to_string(run.pipeline) + ", m = " + std::to_string(run.micro_batches) + ")";
  checked.push_back(label(run, runs) + "pipeline bubble: " + figures);
  if (share < limits.bubble_share) return;
  if (theory >= 0.5 * limits.bubble_share)
    out.push_back({"pipeline bubble (seed §4.1)", label(run, runs) + figures,
                   "more micro-batches per step: raise train.global_batch (now " + key(run, "train.global_batch") +
                       ") or lower train.micro_batch (now " + key(run, "train.micro_batch") + ")"});
  else
    out.push_back({"pipeline stages waiting on each other beyond the schedule's bubble (seed §4.1)",
                   label(run, runs) + figures,
                   "balance the stages with parallel.stage_layers (the first and last carry the embedding and the "
                   "head), and amortise point-to-point latency with a larger train.micro_batch (now " +
                       key(run, "train.micro_batch") + ")"});
}

void checkpoint_rule(const RunFigures& run, size_t runs, const Thresholds& limits, std::vector<Finding>& out,
                     std::vector<std::string>& checked) {
  const double share = run.step_ms_total > 0 ? run.checkpoint_blocking_ms / run.step_ms_total : 0.0;
  const std::string figures =
      std::to_string(run.checkpoints) + " checkpoint writes during training, " +
      std::to_string(run.failed_checkpoints) + " failed in all; they " + format("blocked training %.0f ms, %.1f%% of the %.0f ms of steps", run.checkpoint_blocking_ms,
                           100 * share, run.step_ms_total);
  checked.push_back(label(run, runs) + "checkpoints: " + figures);
  if (run.failed_checkpoints > 0)
    out.push_back({"checkpoint writes failed", label(run, runs) + figures,
                   "make room in the checkpoint directory (" +
                       (key(run, "checkpoint.dir").empty() ? std::string("train.run_dir/checkpoints")
                                                           : key(run, "checkpoint.dir")) +
                       ") or lower checkpoint.keep_full / keep_fast; the run's console says why each failed"});
  if (share >= limits.checkpoint_share)
    out.push_back({"checkpoints blocking training (seed §4.2)", label(run, runs) + figures,
                   std::string(key(run, "checkpoint.async") == "true" ? "" : "set checkpoint.async = true (only the copy "
                                                                              "to host memory blocks); ") +
                       "lengthen checkpoint.full_interval (now " + key(run, "checkpoint.full_interval") +
                       ") or use parameter-only checkpoint.fast_interval (now " + key(run, "checkpoint.fast_interval") +
                       ") between full ones"});
}

// OpenMP threads with no core: ranks × threads beyond the cores of a host make every step wait
// for descheduled threads (10-250x slower steps were measured), which looks like every other
// symptom (fluctuating throughput, exposed communication, a bubble): named first when it is there.
void threads_rule(const RunFigures& run, size_t runs, std::vector<Finding>& out, std::vector<std::string>& checked) {
  const std::string per_rank = key(run, "threads.per_rank"), threads = key(run, "threads.host_threads"),
                    cores = key(run, "threads.host_cores"), ranks = key(run, "threads.host_ranks");
  if (per_rank.empty() || threads.empty() || cores.empty()) {
    checked.push_back(label(run, runs) + "threads: not recorded (a run made before they were)");
    return;
  }
  const std::string figures = per_rank + " OpenMP thread(s) per rank (" +
                              (key(run, "threads.chosen") == "true" ? "chosen by trident" : "OMP_NUM_THREADS") + "), " +
                              ranks + " rank(s) on the busiest host: " + threads + " threads on its " + cores + " core(s)";
  checked.push_back(label(run, runs) + "threads: " + figures);
  if (std::atoi(per_rank.c_str()) <= 1 || std::atoi(threads.c_str()) <= std::atoi(cores.c_str())) return;
  out.insert(out.begin(), Finding{"threads oversubscribe the cores: the cause of slow steps, whatever else is listed",
                                  label(run, runs) + figures,
                                  "unset OMP_NUM_THREADS (trident then takes the cores of each rank's affinity mask over "
                                  "the ranks sharing them) or set it to at most " +
                                      std::to_string(std::max(1, std::atoi(cores.c_str()) / std::max(1, std::atoi(ranks.c_str())))) +
                                      "; bind ranks to cores (mpirun --bind-to core, srun --cpu-bind=cores)"});
}

// Across runs: a run on more ranks that is slower than one on fewer.
void scaling_rule(const std::vector<RunFigures>& runs, const Thresholds& limits, std::vector<Finding>& out,
                  std::vector<std::string>& checked) {
  if (runs.size() < 2) return;
  std::vector<const RunFigures*> sorted;
  for (const RunFigures& r : runs) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(), [](const RunFigures* a, const RunFigures* b) { return a->world < b->world; });
  std::string series;
  for (const RunFigures* r : sorted)
    series += (series.empty() ? "" : ", ") + std::to_string(r->world) + " ranks " +
              format("%.0f tok/s", median(r->tokens_per_s));
  checked.push_back("scaling: " + series);
  for (size_t i = 0; i < sorted.size(); ++i)
    for (size_t j = i + 1; j < sorted.size(); ++j) {
      const RunFigures &small = *sorted[i], &big = *sorted[j];
      if (big.world <= small.world || median(big.tokens_per_s) >= limits.scaling_drop * median(small.tokens_per_s)) continue;
      out.push_back({"throughput falls as ranks are added (seed §5.1: central or flat reduction bottleneck)",
                     big.dir + " on " + std::to_string(big.world) + " ranks makes " +
                         format("%.0f tokens/s, %.0f%% of ", median(big.tokens_per_s),
                                100 * median(big.tokens_per_s) / median(small.tokens_per_s)) +
                         small.dir + " on " + std::to_string(small.world) + " ranks (" +
                         format("%.0f tokens/s", median(small.tokens_per_s)) + "); comm.algo there: " +
                         key(big, "comm.algo"),
                     key(big, "comm.algo") == "hierarchical"
                         ? "the node/rack/cross-rack hierarchy is in use (comm.algo = hierarchical): check per-level "
                           "bytes in metrics.h5 and each level's links with `trident commbench`, and the algorithm "
                           "of the slow level (comm.rack_algo, comm.cross_rack_algo)"
                         : "reduce with the ring or the node/rack/cross-rack hierarchy: comm.algo = hierarchical (now " +
                               key(big, "comm.algo") + "), not flat across slow links or a central (MPI/parameter-"
                               "server) reduction; check per-level bytes in metrics.h5 and `trident commbench`"});
      return;  // one finding for the series
    }
}

}  // namespace

std::vector<Finding> diagnose(const std::vector<RunFigures>& runs, const Thresholds& limits,
                              std::vector<std::string>& checked) {
  std::vector<Finding> findings;
  for (const RunFigures& run : runs) {
    communication_rule(run, runs.size(), limits, findings, checked);
    memory_rule(run, runs.size(), limits, findings, checked);
    nan_rule(run, runs.size(), findings, checked);
    bubble_rule(run, runs.size(), limits, findings, checked);
    checkpoint_rule(run, runs.size(), limits, findings, checked);
    threads_rule(run, runs.size(), findings, checked);
  }
  scaling_rule(runs, limits, findings, checked);
  return findings;
}

}  // namespace trident::diag
