// `trident bench DECK`: the speed of a training step of the deck's model on one rank (random
// tokens, so no data is needed), and with --gemm the f32 throughput of the GEMM library on the
// model's own GEMM shapes — the ceiling the step is measured against (scripts/bench.sh).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/random.hpp"
#include "deck/validate.hpp"
#include "optim/adamw.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "bench/gemm_probe.hpp"
#include "job/job.hpp"
#include "job/memory_plan.hpp"
#include "job/model_setup.hpp"

namespace trident {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void compare_kernels_with_onednn(int rows, int channels, int repeats);  // kernel_bench.cpp

namespace {

// The median seconds of two measurements taken in turns, after `warmup` untimed turns of each:
// alternating, both see the same machine (this host's speed drifts by tens of percent over
// minutes).
std::pair<double, double> alternating_medians(int warmup, int turns, const std::function<double()>& first,
                                              const std::function<double()>& second) {
  std::vector<double> first_times, second_times;
  for (int i = 0; i < warmup + turns; ++i) {
    const double a = first(), b = second();
    if (i < warmup) continue;
    first_times.push_back(a);
    second_times.push_back(b);
  }
  return {median(first_times), median(second_times)};
}

// The model's GEMMs with f32 and with bf16 operands, passes alternating; GFLOP/s of each.
int compare_gemm_bf16(const kernels::Context& device, const model::GptConfig& config, int B, int T, int warmup, int passes) {
  GemmPass f32(device, config, B, T), bf16(device, config, B, T, true);
  const auto [f32_seconds, bf16_seconds] =
      alternating_medians(warmup, passes, [&] { return f32.run(); }, [&] { return bf16.run(); });
  char text[200];
  std::snprintf(text, sizeof text, "gemm threads=%d f32_gflops=%.2f bf16_gflops=%.2f bf16_over_f32=%.2f",
                omp_get_max_threads(), f32.flops() / f32_seconds / 1e9, bf16.flops() / bf16_seconds / 1e9,
                f32_seconds / bf16_seconds);
  print0(text);
  return kExitOk;
}

// Training steps in fp32 and in `precision` (bf16 or fp16), alternating in one process so that
// both see the same machine; the median step of each and their ratio.
int compare_precisions(const Job& job, const std::string& precision, int warmup, int steps) {
  if (precision != "bf16" && precision != "fp16")
    throw UserError("trident bench: --compare takes bf16 or fp16, not '" + precision + "'");
  StepRunner f32(job.device, job.settings, job.record, kernels::Precision::fp32);
  StepRunner low(job.device, job.settings, job.record, precision_from_name(precision));
  const auto [f32_seconds, low_seconds] =
      alternating_medians(warmup, steps, [&] { return f32.run(); }, [&] { return low.run(); });
  char text[256];
  std::snprintf(text, sizeof text, "precision threads=%d fp32_step_ms=%.1f %s_step_ms=%.1f speedup=%.3f %s_tokens_per_s=%.1f",
                omp_get_max_threads(), f32_seconds * 1e3, precision.c_str(), low_seconds * 1e3,
                f32_seconds / low_seconds, precision.c_str(), low.tokens() / low_seconds);
  print0(text);
  return kExitOk;
}

}  // namespace
int run_checkpoint_bench(comm::Communicator& world, const Job& job, int repeats);                   // checkpoint_bench.cpp
int run_op_bench(const Job& job, int warmup, int steps);                                           // op_bench.cpp

int run_bench(comm::Communicator& world, const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  bool gemm = false, kernels = false, checkpoint = false, no_gemm = false, bf16 = false, ops = false;
  std::string compare;  // --compare=bf16|fp16
  int steps = 5, warmup = 2;
  for (const std::string& a : args) {
    if (a == "--gemm") gemm = true;
    else if (a == "--kernels") kernels = true;
    else if (a == "--ops") ops = true;
    else if (a == "--checkpoint") checkpoint = true;
    else if (a == "--no-gemm") no_gemm = true;
    else if (a == "--bf16") bf16 = true;
    else if (a.rfind("--steps=", 0) == 0) steps = std::max(1, std::stoi(a.substr(8)));
    else if (a.rfind("--warmup=", 0) == 0) warmup = std::max(0, std::stoi(a.substr(9)));
    else if (a.rfind("--compare=", 0) == 0) compare = a.substr(10);
    else rest.push_back(a);
  }
  const cli::CommandLine line = cli::parse_command_line("bench", rest);
  if (line.help) {
    print0("usage: trident bench DECK [--gemm | --bf16 | --compare=bf16|fp16 | --kernels | --ops | --checkpoint | --no-gemm] [--steps=5] [--warmup=2] [--section.key=value ...]\n"
           "One-rank training-step speed of the deck's model on random tokens, alternating with\n"
           "passes of the GEMM library over the model's own GEMM shapes (f32, bf16 operands in a bf16\n"
           "run): tokens/s, GFLOP/s\n"
           "and the step's fraction of the GEMM throughput. --gemm: the GEMM passes only;\n"
           "--kernels: our LayerNorm and GELU beside oneDNN's primitives on the model's shapes.\n"
           "--bf16: the model's GEMMs with f32 and with bf16 operands (f32 accumulation), alternating;\n"
           "--compare=bf16|fp16: training steps in fp32 and in that precision, alternating;\n"
           "--no-gemm: the steps only (and their peak activation memory);\n"
           "--ops: the steps with every kernel operation timed (host clock on the CPU, events on CUDA):\n"
           "each operation's calls, ms and share of the step, the slowest first;\n"
           "--checkpoint: full checkpoints (--steps of them) beside plain sequential writes of the\n"
           "same bytes to the same directory, and the restart time (any number of ranks).");
    return kExitOk;
  }
  const Job job = load_job(world, line);
  if (checkpoint) return run_checkpoint_bench(world, job, steps);
  if (ops && job.settings.kernels.graphs)  // events inside a capture would be nodes of the graph
    throw UserError("trident bench --ops times each kernel operation with events on the stream, which a "
                    "captured graph cannot hold: " + job.record.cite("cuda.graphs") + "; bench --ops with "
                    "cuda.graphs = false (trident bench without --ops runs the graphed step)");
  if (ops) return run_op_bench(job, warmup, steps);
  const model::GptConfig config = model_config(job.settings.model, job.record);
  const int B = job.settings.train.micro_batch;
  const int T = job.settings.train.seq_len;
  if (kernels) {
    compare_kernels_with_onednn(B * T, config.channels, std::max(steps, 10));
    return kExitOk;
  }
  if (bf16) return compare_gemm_bf16(job.device, config, B, T, warmup, steps);
  if (!compare.empty()) return compare_precisions(job, compare, warmup, steps);
  // Steps and GEMM passes alternate (--gemm: no steps; --no-gemm: no passes, and no operands
  // of them: three of B·T·Vp floats at the head's shape). The passes' operands are of the run's
  // precision where it is bf16 (the step's GEMMs are), else f32: gemm_dtype says which.
  std::optional<StepRunner> step;
  if (!gemm) step.emplace(job.device, job.settings, job.record, job.settings.precision.precision);
  const bool bf16_pass = job.settings.precision.precision == kernels::Precision::bf16;
  std::optional<GemmPass> gemm_pass;
  if (!no_gemm) gemm_pass.emplace(job.device, config, B, T, bf16_pass);
  const auto [gemm_seconds, seconds_per_step] = alternating_medians(
      warmup, steps, [&] { return gemm_pass ? gemm_pass->run() : 0.0; }, [&] { return step ? step->run() : 0.0; });
  const double gemm_gflops = gemm_pass ? gemm_pass->flops() / gemm_seconds / 1e9 : 0.0;
  const char* gemm_dtype = bf16_pass ? "bf16" : "f32";
  char text[320];
  if (!step) {
    std::snprintf(text, sizeof text, "gemm threads=%d gflops=%.2f gemm_dtype=%s", omp_get_max_threads(), gemm_gflops,
                  gemm_dtype);
  } else {
    const double gflops = step->flops() / seconds_per_step / 1e9;
    char against[128] = "";
    if (gemm_pass)
      std::snprintf(against, sizeof against, " gemm_gflops=%.2f gemm_dtype=%s of_gemm=%.3f", gemm_gflops, gemm_dtype,
                    gflops / gemm_gflops);
    if (job.settings.kernels.graphs)
      std::snprintf(against + std::strlen(against), sizeof against - std::strlen(against), " graph_replays=%lld",
                    static_cast<long long>(step->graph_replays()));
    std::snprintf(text, sizeof text, "step threads=%d tokens_per_s=%.1f step_ms=%.1f gflops=%.2f%s activations_mib=%.1f",
                  omp_get_max_threads(), step->tokens() / seconds_per_step, seconds_per_step * 1e3, gflops, against,
                  memory_usage().peak[static_cast<int>(MemoryCategory::Activations)] / 1048576.0);
  }
  print0(text);
  return kExitOk;
}

}  // namespace trident
