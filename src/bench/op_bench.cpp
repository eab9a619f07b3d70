// `trident bench DECK --ops`: the training step of the deck's model, one rank, with every kernel
// operation timed (kernels/op_times.hpp: the host clock on the CPU, events on CUDA) — each
// operation's calls, milliseconds and share of the step, the slowest first, and what the step
// spent outside the operations (the optimizer's host work, the framework). What issue 32's table
// estimated from FLOP and byte counts, measured wherever the program runs.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/gemm_probe.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "job/job.hpp"
#include "kernels/op_times.hpp"

namespace trident {

int run_op_bench(const Job& job, int warmup, int steps) {
  kernels::OpTimes times;
  kernels::Context ctx = job.device;
  ctx.op_times = &times;
  StepRunner step(ctx, job.settings, job.record, job.settings.precision.precision);
  for (int i = 0; i < warmup; ++i) step.run();
  times.totals();  // the warm-up's calls (primitives created, memory first touched) not counted
  double step_seconds = 0;
  for (int i = 0; i < steps; ++i) step_seconds += step.run();
  const auto totals = times.totals();
  std::vector<std::pair<std::string, kernels::OpTimes::Total>> rows(totals.begin(), totals.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  const double per_step = step_seconds / steps;
  print0("# trident bench --ops: " + job_summary(job) + ", " + kernels::precision_name(job.settings.precision.precision) +
         ", " + std::to_string(steps) + " steps after " + std::to_string(warmup) + " of warm-up");
  print0("# operation                    calls/step     ms/step    share");
  double in_operations = 0;
  for (const auto& [name, total] : rows) {
    char line[160];
    std::snprintf(line, sizeof line, "%-30s %10.1f %11.3f %7.1f%%", name.c_str(), double(total.calls) / steps,
                  total.seconds / steps * 1e3, 100.0 * total.seconds / steps / per_step);
    print0(line);
    in_operations += total.seconds / steps;
  }
  char line[200];
  std::snprintf(line, sizeof line, "%-30s %10s %11.3f %7.1f%%\nstep_ms=%.3f operations_ms=%.3f", "(outside the operations)",
                "", (per_step - in_operations) * 1e3, 100.0 * (per_step - in_operations) / per_step, per_step * 1e3,
                in_operations * 1e3);
  print0(line);
  return kExitOk;
}

}  // namespace trident
