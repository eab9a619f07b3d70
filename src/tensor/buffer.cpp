// Tracked allocation through an Allocator, and the host allocator.
#include "tensor/buffer.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace trident {
namespace {

constexpr size_t kAlignment = 64;
constexpr int kCategories = static_cast<int>(MemoryCategory::Count);
std::atomic<int64_t> g_current[kCategories];
std::atomic<int64_t> g_peak[kCategories];
std::atomic<int64_t> g_total_current{0}, g_total_peak{0};
std::atomic<int64_t> g_device_current{0};  // MemoryKind::device's share of g_total_current
std::atomic<int64_t> g_buffers_current{0}, g_buffers_peak{0}, g_granular_current{0}, g_granular_peak{0};

int64_t granular(size_t bytes) {
  return (static_cast<int64_t>(bytes) + kDeviceGranularityBytes - 1) / kDeviceGranularityBytes * kDeviceGranularityBytes;
}

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return text;
}

class HostAllocator : public Allocator {
 public:
  Device device() const override { return Device{}; }
  void* allocate(size_t bytes, MemoryKind) override {
    void* pointer = nullptr;
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (posix_memalign(&pointer, kAlignment, rounded) != 0) return nullptr;
    std::memset(pointer, 0, rounded);
    return pointer;
  }
  void release(void* pointer, size_t, MemoryKind) override { std::free(pointer); }
};

}  // namespace

Allocator& host_allocator() {
  // Never destroyed, so that buffers of static storage duration (the CPU's widening workspace),
  // released at exit in whatever order, can still reach it.
  static HostAllocator* const allocator = new HostAllocator();
  return *allocator;
}

OutOfMemory::OutOfMemory(size_t bytes, MemoryCategory category) {
  message_ = "out of memory: could not allocate " + mib(static_cast<int64_t>(bytes)) + " for " +
             memory_category_name(category) + " (this rank's tracked buffers hold " + mib(g_total_current) +
             " already, at most " + mib(g_total_peak) + " so far)";
}

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::Parameters: return "parameters";
    case MemoryCategory::Gradients: return "gradients";
    case MemoryCategory::OptimizerState: return "optimizer";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::Communication: return "communication";
    case MemoryCategory::Workspace: return "workspace";
    case MemoryCategory::Checkpoint: return "checkpoint";
    case MemoryCategory::Count: break;
  }
  return "?";
}

int64_t MemoryUsage::total_current() const {
  int64_t sum = 0;
  for (int64_t bytes : current) sum += bytes;
  return sum;
}

MemoryUsage memory_usage() {
  MemoryUsage usage;
  for (int c = 0; c < kCategories; ++c) usage.current[c] = g_current[c], usage.peak[c] = g_peak[c];
  usage.total_peak = g_total_peak;
  usage.device_current = g_device_current;
  usage.buffers_peak = g_buffers_peak;
  usage.granular_peak = g_granular_peak;
  return usage;
}

void* tracked_alloc(size_t bytes, MemoryCategory category, Allocator& allocator, MemoryKind kind) {
  if (bytes == 0) return nullptr;
  void* pointer = allocator.allocate(bytes, kind);
  if (pointer == nullptr) throw OutOfMemory(bytes, category);
  const int c = static_cast<int>(category);
  raise_peak(g_peak[c], g_current[c] += static_cast<int64_t>(bytes));
  raise_peak(g_total_peak, g_total_current += static_cast<int64_t>(bytes));
  if (kind == MemoryKind::device) g_device_current += static_cast<int64_t>(bytes);
  raise_peak(g_buffers_peak, ++g_buffers_current);
  raise_peak(g_granular_peak, g_granular_current += granular(bytes));
  return pointer;
}

void tracked_external(int64_t bytes, MemoryCategory category) {
  const int c = static_cast<int>(category);
  raise_peak(g_peak[c], g_current[c] += bytes);
  raise_peak(g_total_peak, g_total_current += bytes);
}

void tracked_free(void* pointer, size_t bytes, MemoryCategory category, Allocator& allocator, MemoryKind kind) {
  allocator.release(pointer, bytes, kind);
  g_current[static_cast<int>(category)] -= static_cast<int64_t>(bytes);
  g_total_current -= static_cast<int64_t>(bytes);
  if (kind == MemoryKind::device) g_device_current -= static_cast<int64_t>(bytes);
  --g_buffers_current;
  g_granular_current -= granular(bytes);
}

}  // namespace trident
