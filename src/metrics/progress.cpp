// The console's progress figures: ETA, MFU against the measured GEMM peak, end-of-run totals.
#include "metrics/progress.hpp"

#include <cstdio>
#include <numeric>
#include <vector>

#include "tensor/tensor.hpp"

namespace trident::metrics {

double measure_gemm_peak_tflops(kernels::Precision precision, int n) {
  kernels::Context ctx;
  const size_t count = static_cast<size_t>(n) * n;
  std::vector<float> a(count, 0.01f), b(count, 0.02f), c(count, 0.0f);  // (n, n) each
  std::vector<kernels::bf16> a16, b16;
  // Where this process widens bf16 operands to f32 (no bf16 matmul on the CPU), its bf16 GEMMs
  // run as f32 GEMMs: the f32 rate is their peak, and measuring it needs no widening workspace
  // (which would count in the run's tracked memory as if training had used it).
  const bool bf16 = precision == kernels::Precision::bf16 && !kernels::widens_low16(ctx, precision);
  if (bf16) {
    a16.resize(count), b16.resize(count);
    kernels::convert(ctx, view(a16.data(), DType::bf16, count), view(a.data(), count));
    kernels::convert(ctx, view(b16.data(), DType::bf16, count), view(b.data(), count));
  }
  double best = 1e300;
  for (int run = 0; run < 3; ++run) {  // the first creates the primitive and warms the caches
    const auto start = SteadyClock::now();
    if (bf16) kernels::batched_matmul_bf16(ctx, c.data(), a16.data(), b16.data(), 1, n, n, n, false, false, false);
    else kernels::batched_matmul(ctx, c.data(), a.data(), b.data(), 1, n, n, n, false, false, false);
    if (run > 0) best = std::min(best, seconds_since(start));
  }
  return 2.0 * n * n * double(n) / best / 1e12;
}

std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  if (s < 60) std::snprintf(text, sizeof text, "%llds", static_cast<long long>(s));
  else if (s < 3600) std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else if (s < 86400) std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  else std::snprintf(text, sizeof text, "%lldd%02lldh", static_cast<long long>(s / 86400), static_cast<long long>(s / 3600 % 24));
  return text;
}

RunProgress::RunProgress(int64_t total_steps, int64_t first_step, int window)
    : total_steps_(total_steps), completed_(first_step), window_(static_cast<size_t>(window)),
      start_(SteadyClock::now()), last_(start_) {}

void RunProgress::step_done(int64_t completed, double tokens, double step_seconds) {
  const auto now = SteadyClock::now();
  // The first interval holds the start-up (validation at step 0, primitive creation): not a pace.
  if (tokens_ > 0) recent_.push_back(std::chrono::duration<double>(now - last_).count());
  if (recent_.size() > window_) recent_.pop_front();
  last_ = now, completed_ = completed;
  tokens_ += tokens, step_seconds_ += step_seconds;
}

double RunProgress::eta_seconds() const {
  if (recent_.empty()) return -1;
  const double mean = std::accumulate(recent_.begin(), recent_.end(), 0.0) / recent_.size();
  return mean * static_cast<double>(total_steps_ - completed_);
}

std::string RunProgress::summary() const {
  const double total = seconds_since(start_);
  char line[256];
  std::snprintf(line, sizeof line,
                "run: %s (%.1f s), %.0f tokens, %.0f tokens/s in the steps (%.0f overall); evaluation %.1f s, "
                "checkpoints %.1f s",
                format_duration(total).c_str(), total, tokens_, step_seconds_ > 0 ? tokens_ / step_seconds_ : 0.0,
                total > 0 ? tokens_ / total : 0.0, evaluation_seconds_, checkpoint_seconds_);
  return line;
}

}  // namespace trident::metrics
