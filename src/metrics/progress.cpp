// The console's progress figures: ETA, MFU against the measured GEMM peak, end-of-run totals.
#include "metrics/progress.hpp"

#include <cstdio>
#include <new>
#include <numeric>
#include <vector>

#include "kernels/backend.hpp"
#include "tensor/tensor.hpp"

namespace trident::metrics {
namespace {

// Memory of the process's kernel backend on its device, not tracked: the probe's operands are
// not the run's (tracked, they would count in its memory as if training had used them).
class DeviceScratch {
 public:
  DeviceScratch(kernels::Backend& backend, size_t bytes)
      : backend_(backend), bytes_(bytes), data_(backend.allocate(bytes, MemoryKind::device)) {
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~DeviceScratch() { backend_.release(data_, bytes_, MemoryKind::device); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  kernels::Backend& backend_;
  size_t bytes_;
  void* data_;
};

}  // namespace

double measure_gemm_peak_tflops(kernels::Precision precision, int n) {
  kernels::Context ctx;
  kernels::Backend& backend = kernels::backend_of(ctx);
  const Device device = backend.device();
  const size_t count = static_cast<size_t>(n) * n;
  // (n, n) each, on the device the GEMMs run on.
  DeviceScratch a(backend, count * sizeof(float)), b(backend, count * sizeof(float)), c(backend, count * sizeof(float));
  kernels::upload(ctx, view(a.as<float>(), count, device), std::vector<float>(count, 0.01f).data());
  kernels::upload(ctx, view(b.as<float>(), count, device), std::vector<float>(count, 0.02f).data());
  // Where this process widens bf16 operands to f32 (no bf16 matmul on the CPU), its bf16 GEMMs
  // run as f32 GEMMs: the f32 rate is their peak, and measuring it needs no widening workspace
  // (which would count in the run's tracked memory as if training had used it).
  const bool bf16 = precision == kernels::Precision::bf16 && !kernels::widens_low16(ctx, precision);
  const size_t count16 = bf16 ? count : 0;
  DeviceScratch a16(backend, count16 * sizeof(kernels::bf16) + 64), b16(backend, count16 * sizeof(kernels::bf16) + 64);
  if (bf16) {
    kernels::convert(ctx, view(a16.as<kernels::bf16>(), DType::bf16, count, device), view(a.as<float>(), count, device));
    kernels::convert(ctx, view(b16.as<kernels::bf16>(), DType::bf16, count, device), view(b.as<float>(), count, device));
  }
  double best = 1e300;
  for (int run = 0; run < 3; ++run) {  // the first creates the primitive and warms the caches
    const auto start = SteadyClock::now();
    if (bf16)
      kernels::batched_matmul_bf16(ctx, c.as<float>(), a16.as<kernels::bf16>(), b16.as<kernels::bf16>(), 1, n, n, n,
                                   false, false, false);
    else kernels::batched_matmul(ctx, c.as<float>(), a.as<float>(), b.as<float>(), 1, n, n, n, false, false, false);
    kernels::sum(ctx, view(c.as<float>(), 1, device));  // waits for the product where the device runs behind
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
