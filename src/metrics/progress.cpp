// The console's progress figures: ETA, MFU against the measured GEMM peak, end-of-run totals.
#include "metrics/progress.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

std::vector<float> probe_values(size_t count, uint64_t seed) {
  std::vector<float> values(count);
  for (float& v : values) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    v = static_cast<float>(static_cast<int32_t>(seed >> 32)) * (1.0f / 2147483648.0f);
  }
  return values;
}

namespace {

// `runs` products of n × n × n after `warmups` untimed ones; seconds per product. On the CPU the
// host clock around each product (the best of them); on a GPU, events on the stream around all
// of them: the host clock would time the launches, and idle clocks the first products.
struct GemmProbe {
  kernels::Context& ctx;
  kernels::Backend& backend;
  int n;
  DType operands;  // f32, or the 16-bit type the run's GEMMs read
  double seconds_per_product(int warmups, int runs) {
    const Device device = backend.device();
    const size_t count = static_cast<size_t>(n) * n;
    // (n, n) each, on the device the GEMMs run on.
    DeviceScratch a(backend, count * sizeof(float)), b(backend, count * sizeof(float)), c(backend, count * sizeof(float));
    const bool random = device.kind == DeviceKind::cuda;  // the CPU's (and the guard's) figure as it always was
    kernels::upload(ctx, view(a.as<float>(), count, device),
                    (random ? probe_values(count, 1) : std::vector<float>(count, 0.01f)).data());
    kernels::upload(ctx, view(b.as<float>(), count, device),
                    (random ? probe_values(count, 2) : std::vector<float>(count, 0.02f)).data());
    const bool low16 = operands != DType::f32;
    const size_t count16 = low16 ? count : 0;
    DeviceScratch a16(backend, count16 * sizeof(uint16_t) + 64), b16(backend, count16 * sizeof(uint16_t) + 64);
    const Shape square{n, n};
    const Tensor a_low{a16.as<uint16_t>(), operands, square, device};
    const Tensor b_low{b16.as<uint16_t>(), operands, square, device};
    if (low16) {
      kernels::convert(ctx, a_low, view(a.as<float>(), square, device));
      kernels::convert(ctx, b_low, view(b.as<float>(), square, device));
    }
    const Tensor product_of = view(c.as<float>(), square, device);
    const Tensor a32 = view(a.as<float>(), square, device), b32 = view(b.as<float>(), square, device);
    // The linear layer's GEMM (c = a · bᵀ) on the 16-bit operands, bf16 or fp16: the rate the run's
    // 16-bit GEMMs have (on a GPU the tensor cores', for fp16 as for bf16).
    const auto product = [&] {
      if (low16) kernels::linear_forward(ctx, product_of, a_low, b_low, Tensor{});
      else kernels::batched_matmul(ctx, product_of, a32, b32, false, false, false);
    };
    for (int w = 0; w < warmups; ++w) product();  // the first creates the primitive and warms the caches
    if (device.kind == DeviceKind::cuda) {
      const kernels::Backend::Mark from = backend.mark(ctx.stream);
      for (int r = 0; r < runs; ++r) product();
      return backend.seconds_between(from, backend.mark(ctx.stream)) / runs;
    }
    double best = 1e300;
    for (int r = 0; r < runs; ++r) {
      const auto start = SteadyClock::now();
      product();
      kernels::sum(ctx, view(c.as<float>(), 1, device));  // waits for the product where the device runs behind
      best = std::min(best, seconds_since(start));
    }
    return best;
  }
};

}  // namespace

GemmPeak measure_gemm_peak(const kernels::Context& device, kernels::Precision precision) {
  kernels::Context ctx = device;
  kernels::Backend& backend = kernels::backend_of(ctx);
  // Where this process widens 16-bit operands to f32 (no bf16 or fp16 matmul on the CPU), its
  // 16-bit GEMMs run as f32 GEMMs: the f32 rate is their peak, and measuring it needs no widening
  // workspace (which would count in the run's tracked memory as if training had used it).
  const DType operands = precision == kernels::Precision::fp32 || kernels::widens_low16(ctx, precision)
                             ? DType::f32
                             : kernels::storage_dtype(precision);
  if (backend.device().kind != DeviceKind::cuda) {
    const int n = kCpuGemmPeakSize;
    GemmProbe probe{ctx, backend, n, operands};
    return {2.0 * n * double(n) * n / probe.seconds_per_product(1, 2) / 1e12, n};
  }
  // A GPU: a size that fills it (8192^3: 1.1 TFLOP a product), 10 products to warm its clocks,
  // 20 timed; smaller where the device has no room left beside the model. TRIDENT_GPU_PEAK_SIZE
  // sets the size instead: the CUDA emulator's tests (tests/cuda_emu), whose "GPU" is this CPU
  // running each product as plain loops, ask for a small one.
  std::vector<int> sizes{8192, 4096, 2048};
  if (const char* size = std::getenv("TRIDENT_GPU_PEAK_SIZE"); size != nullptr && std::atoi(size) > 0)
    sizes = {std::atoi(size)};
  for (int n : sizes) {
    try {
      GemmProbe probe{ctx, backend, n, operands};
      return {2.0 * n * double(n) * n / probe.seconds_per_product(10, 20) / 1e12, n};
    } catch (const std::bad_alloc&) {
    }
  }
  throw std::bad_alloc();
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
