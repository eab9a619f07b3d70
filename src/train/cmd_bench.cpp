// `trident bench DECK`: the speed of a training step of the deck's model on one rank (random
// tokens, so no data is needed), and with --gemm the f32 throughput of the GEMM library on the
// model's own GEMM shapes — the ceiling the step is measured against (scripts/bench.sh).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/random.hpp"
#include "deck/validate.hpp"
#include "optim/adamw.hpp"
#include "train/commands.hpp"
#include "train/job.hpp"
#include "train/model_setup.hpp"

namespace trident {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One GEMM as the model runs it: c[b] (M, N) = op(a[b]) · op(b[b]) for b < batch.
struct GemmShape {
  int batch, M, N, K;
  bool ta, tb, accumulate;
};

// Every forward and backward GEMM of one micro-batch (B sequences of T tokens), as
// model/gpt2.cpp and kernels/cpu/attention.cpp call them.
std::vector<GemmShape> model_gemms(const model::GptConfig& c, int B, int T) {
  std::vector<GemmShape> shapes;
  const int C = c.channels, BT = B * T, heads = B * c.heads, hs = c.channels / c.heads;
  for (int l = 0; l < c.layers; ++l) {
    shapes.push_back({heads, T, T, hs, false, true, false});   // S = q kᵀ
    shapes.push_back({heads, T, hs, T, false, false, false});  // y = P v
    shapes.push_back({heads, T, T, hs, false, true, false});   // dP = dy vᵀ
    shapes.push_back({heads, T, hs, T, true, false, false});   // dv = Pᵀ dy
    shapes.push_back({heads, T, hs, T, false, false, false});  // dq = dS k
    shapes.push_back({heads, T, hs, T, true, false, false});   // dk = dSᵀ q
  }
  const std::pair<int, int> linears[] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, c.padded_vocab}};
  for (const auto& [K, N] : linears) {
    const int repeat = N == c.padded_vocab ? 1 : c.layers;
    for (int r = 0; r < repeat; ++r) {
      shapes.push_back({1, BT, N, K, false, true, false});  // y = x wᵀ
      shapes.push_back({1, BT, K, N, false, false, false});  // dx = dy w
      shapes.push_back({1, N, K, BT, true, false, true});    // dw += dyᵀ x
    }
  }
  return shapes;
}

double gemm_gflops(const model::GptConfig& config, int B, int T, int repeats) {
  kernels::Context ctx;
  const auto shapes = model_gemms(config, B, T);
  size_t largest = 0;
  for (const auto& s : shapes)
    largest = std::max({largest, size_t(s.batch) * s.M * s.K, size_t(s.batch) * s.K * s.N,
                        size_t(s.batch) * s.M * s.N});
  std::vector<float> a(largest, 0.01f), b(largest, 0.02f), c(largest, 0.0f);
  double flops = 0;
  for (const auto& s : shapes) flops += 2.0 * s.batch * s.M * s.N * s.K;
  std::vector<double> times;  // the median, as for the step: the same statistic on both sides
  for (int r = 0; r < repeats + 1; ++r) {  // the first pass creates the primitives
    const auto start = Clock::now();
    for (const auto& s : shapes)
      kernels::batched_matmul(ctx, c.data(), a.data(), b.data(), s.batch, s.M, s.N, s.K, s.ta, s.tb,
                              s.accumulate);
    if (r > 0) times.push_back(seconds(start));
  }
  std::sort(times.begin(), times.end());
  return flops / times[times.size() / 2] / 1e9;
}

// Median step time over `steps` timed steps after `warmup`.
double step_seconds(const Job& job, int warmup, int steps) {
  const deck::Deck& deck = job.deck;
  kernels::Context ctx;
  const model::GptConfig config = model_config_from_deck(deck);
  model::Gpt2 gpt(config, ctx);
  initialise_parameters(deck, gpt);
  optim::AdamW optimizer(config, {});
  const int B = static_cast<int>(deck.get_int("train.micro_batch"));
  const int T = static_cast<int>(deck.get_int("model.seq_len"));
  const int64_t micro_batches = deck::micro_batches_per_step(deck);
  std::vector<int32_t> tokens(static_cast<size_t>(B) * T + 1);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(uniform_below(1, 7, i, config.vocab));
  std::vector<double> times;
  for (int step = 0; step < warmup + steps; ++step) {
    const auto start = Clock::now();
    gpt.zero_grad();
    for (int64_t m = 0; m < micro_batches; ++m) {
      gpt.forward(tokens.data(), tokens.data() + 1, B, T);
      gpt.backward(1.0f / micro_batches);
    }
    optim::clip_grad_norm(ctx, gpt.grads(), gpt.num_parameters(), 1.0f);
    optimizer.step(ctx, gpt.params(), gpt.grads(), 1e-4f, step + 1);
    if (step >= warmup) times.push_back(seconds(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

void compare_kernels_with_onednn(int rows, int channels, int repeats);  // kernel_bench.cpp

int run_bench(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  bool gemm = false, kernels = false;
  int steps = 5, warmup = 2;
  for (const std::string& a : args) {
    if (a == "--gemm") gemm = true;
    else if (a == "--kernels") kernels = true;
    else if (a.rfind("--steps=", 0) == 0) steps = std::max(1, std::stoi(a.substr(8)));
    else if (a.rfind("--warmup=", 0) == 0) warmup = std::max(0, std::stoi(a.substr(9)));
    else rest.push_back(a);
  }
  const cli::CommandLine line = cli::parse_command_line("bench", rest);
  if (line.help) {
    print0("usage: trident bench DECK [--gemm | --kernels] [--steps=5] [--warmup=2] [--section.key=value ...]\n"
           "One-rank training-step speed of the deck's model on random tokens; --gemm: the GEMM\n"
           "library's f32 throughput on the model's GEMM shapes instead; --kernels: our LayerNorm\n"
           "and GELU beside oneDNN's primitives on the model's shapes.");
    return kExitOk;
  }
  const Job job = load_job(line);
  const model::GptConfig config = model_config_from_deck(job.deck);
  const int B = static_cast<int>(job.deck.get_int("train.micro_batch"));
  const int T = static_cast<int>(job.deck.get_int("model.seq_len"));
  char text[256];
  if (kernels) {
    compare_kernels_with_onednn(B * T, config.channels, std::max(steps, 10));
    return kExitOk;
  }
  if (gemm) {
    std::snprintf(text, sizeof text, "gemm threads=%d gflops=%.2f", omp_get_max_threads(),
                  gemm_gflops(config, B, T, steps));
  } else {
    const double step = step_seconds(job, warmup, steps);
    const double tokens = static_cast<double>(deck::micro_batches_per_step(job.deck)) * B * T;
    const double flops = tokens * model::training_flops_per_token(config, T);
    std::snprintf(text, sizeof text, "step threads=%d tokens_per_s=%.1f step_ms=%.1f gflops=%.2f",
                  omp_get_max_threads(), tokens / step, step * 1e3, flops / step / 1e9);
  }
  print0(text);
  return kExitOk;
}

}  // namespace trident
