// The guarded backend (kernels.device = guard): the CPU's kernels on "device" memory that host
// code cannot touch outside a kernel call — what a GPU's memory is to the host, on any machine.
//
// Why: the trainer runs on CUDA only if every byte of the model that host code reads or writes
// goes through the backend (upload, download, the kernels) or a communicator that stages device
// buffers. A GPU is lent to this project only now and then; this backend finds the host access
// a GPU would fault on (or silently misread) in every test run, here. Its device memory is its
// own mapping, PROT_NONE between kernel calls; while one of its kernels runs (on any thread)
// every device mapping is readable and writable. Host code that touches a device buffer directly
// gets SIGSEGV at the line that does it.
//
// A fault inside a guarded mapping is reported as what it is — one line naming the address and
// the guard, then exit status 70 — not as a crash; any other SIGSEGV keeps its default action.
//
// Each kernel's buffer arguments must lie in device memory too: the CPU's kernels would read a
// host buffer handed to them, a GPU's would not; such a call is reported the same way.
//
// Limits: while a kernel runs on one thread, another thread's stray access goes unnoticed (the
// guard is process-wide); page granularity, so each buffer is its own mapping. A tiny model's
// step makes a few hundred kernel calls, each two rounds of mprotect: slow, but only tests use it.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <cstdio>
#include <iterator>
#include <type_traits>

#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <vector>

#include "kernels/backend.hpp"

namespace trident::kernels::guard {
namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

size_t mapped_bytes(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }

// The lowest and highest guarded addresses ever mapped: enough to tell a stray access to device
// memory from any other fault without taking the guard's lock in a signal handler.
std::atomic<uintptr_t> g_low{UINTPTR_MAX}, g_high{0};

void note_range(void* memory, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(memory), end = begin + bytes;
  for (uintptr_t low = g_low.load(); begin < low && !g_low.compare_exchange_weak(low, begin);) {
  }
  for (uintptr_t high = g_high.load(); end > high && !g_high.compare_exchange_weak(high, end);) {
  }
}

void install_fault_report();

// The device mappings and whether kernels are running (how many, over all threads).
class Guard {
 public:
  void* map(size_t bytes) {
    // Again at each mapping: a handler installed since (a test framework's, per test case)
    // would otherwise take the report's place.
    install_fault_report();
    std::lock_guard<std::mutex> lock(mutex_);
    void* memory = mmap(nullptr, mapped_bytes(bytes), open_ ? PROT_READ | PROT_WRITE : PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return nullptr;  // zeroed by mmap
    mappings_[memory] = mapped_bytes(bytes);
    note_range(memory, mapped_bytes(bytes));
    return memory;
  }
  void unmap(void* memory) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = mappings_.find(memory);
    if (it == mappings_.end()) return;
    munmap(it->first, it->second);
    mappings_.erase(it);
  }
  // Whether `pointer` lies in one of the device mappings.
  bool contains(const void* pointer) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto after = mappings_.upper_bound(const_cast<void*>(pointer));
    if (after == mappings_.begin()) return false;
    const auto& [memory, bytes] = *std::prev(after);
    return static_cast<const char*>(pointer) < static_cast<char*>(memory) + bytes;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_++ == 0) protect(PROT_READ | PROT_WRITE);
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--open_ == 0) protect(PROT_NONE);
  }

 private:
  void protect(int access) {
    for (const auto& [memory, bytes] : mappings_) mprotect(memory, bytes, access);
  }
  std::mutex mutex_;
  std::map<void*, size_t> mappings_;
  int open_ = 0;
};

Guard& guard() {
  static Guard* instance = new Guard;  // never destroyed: buffers may outlive static destruction
  return *instance;
}

void on_fault(int, siginfo_t* info, void*) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (address >= g_low.load() && address < g_high.load()) {
    char text[200];
    const int n = std::snprintf(text, sizeof text,
                                "error: kernels.device = guard: host code touched device memory at %p outside a "
                                "kernel (on a GPU this access would fault or read garbage)\n",
                                info->si_addr);
    if (n > 0) (void)!write(STDERR_FILENO, text, static_cast<size_t>(n));
    _exit(70);
  }
  signal(SIGSEGV, SIG_DFL);  // not ours: the default action, at the same instruction
}

void install_fault_report() {
  struct sigaction action {};
  action.sa_sigaction = &on_fault;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
}

struct Opened {
  Opened() { guard().open(); }
  ~Opened() { guard().close(); }
  Opened(const Opened&) = delete;
  Opened& operator=(const Opened&) = delete;
};

// A kernel's buffers must be device memory: the CPU's kernels would read host memory as well,
// a GPU's would not. Every Tensor argument is checked (null data: an absent optional buffer);
// the operations' only plain pointers are the host side of upload and download (void*).
void require_device(const char* op, int index, const void* pointer) {
  if (pointer == nullptr || guard().contains(pointer)) return;
  std::fprintf(stderr,
               "error: kernels.device = guard: kernel %s got host memory at %p as its argument %d, not device "
               "memory (on a GPU it would read garbage or fault)\n",
               op, pointer, index);
  _exit(70);
}
template <class T>
void check_argument(const char*, int, const T&) {}  // values: sizes, scalars, the Context, host pointers
void check_argument(const char* op, int index, const Tensor& tensor) { require_device(op, index, tensor.data); }
void check_argument(const char* op, int index, const std::vector<Tensor>& tensors) {
  for (const Tensor& tensor : tensors) require_device(op, index, tensor.data);
}

// Graphs (cuda.graphs): while a thread captures, its kernel calls are recorded, not run — each
// a call of the CPU's entry with the arguments as they were (what a CUDA Graph's kernel nodes
// hold) — and a replay runs them in order. A call CUDA cannot capture is reported: a transfer
// to or from host memory, or a result the host reads (sum, sums_of_squares). The GEMM
// preparations create host-side primitives only, run at once as on CUDA.
thread_local std::vector<std::function<void()>>* t_recording = nullptr;

// Backend::host_reads: the calls whose result the host read (every thread's).
std::atomic<int64_t> g_host_reads{0};

struct RecordedGraph {
  std::vector<std::function<void()>> calls;
};

[[noreturn]] void uncapturable(const char* op, const char* why) {
  std::fprintf(stderr,
               "error: kernels.device = guard: kernel %s inside a captured graph (cuda.graphs): %s; on a GPU the "
               "capture fails\n",
               op, why);
  _exit(70);
}

bool named(const char* op, const char* name) { return std::strcmp(op, name) == 0; }

// What narrow returns without running: its documented result, the values' own memory in the
// 16-bit type (kernels/ops.inc).
Tensor narrowed(Context&, const Tensor& values, DType type) { return Tensor{values.data, type, values.shape, values.device}; }

// The CPU's entry `Op`, its buffer arguments checked, called with the device memory open (or,
// while this thread captures, recorded).
template <class F, F KernelTable::*Op>
struct Wrap;
template <class R, class... Args, R (*KernelTable::*Op)(Args...)>
struct Wrap<R (*)(Args...), Op> {
  static const char* name;
  static R run(Args... args) {
    Opened opened;
    return (cpu_backend().kernels().*Op)(args...);
  }
  // The host reads the result: a value returned (sum, sums_of_squares), or download's copy.
  static constexpr bool kReturnsToHost = std::is_same_v<R, double> || std::is_same_v<R, std::vector<double>>;
  static bool reads_host() {
    static const bool reads = kReturnsToHost || named(name, "download");  // decided once: name is set by then
    return reads;
  }
  static R record(Args... args) {
    if constexpr (kReturnsToHost) uncapturable(name, "its result is read on the host");
    if (named(name, "upload") || named(name, "download") || named(name, "stage_download"))
      uncapturable(name, "it copies host memory");
    if (named(name, "prepare_linear") || named(name, "prepare_attention")) return run(args...);
    t_recording->push_back([arguments = std::make_tuple(std::decay_t<Args>(args)...)]() mutable {
      std::apply(&Wrap::run, arguments);
    });
    if constexpr (std::is_same_v<R, Tensor>) return narrowed(args...);
    else if constexpr (!std::is_void_v<R>) return R{};
  }
  static R call(Args... args) {
    int index = 0;
    (check_argument(name, index++, args), ...);
    if (reads_host()) ++g_host_reads;
    if (t_recording != nullptr) return record(args...);
    return run(args...);
  }
};
template <class R, class... Args, R (*KernelTable::*Op)(Args...)>
const char* Wrap<R (*)(Args...), Op>::name = "";

#define TRIDENT_GUARDED(op) \
  Wrap<decltype(t.op), &KernelTable::op>::name = #op; \
  t.op = &Wrap<decltype(t.op), &KernelTable::op>::call

KernelTable make_table() {
  KernelTable t;
  TRIDENT_GUARDED(clear);
  TRIDENT_GUARDED(copy);
  TRIDENT_GUARDED(upload);
  TRIDENT_GUARDED(download);
  TRIDENT_GUARDED(stage_download);
  TRIDENT_GUARDED(sum);
  TRIDENT_GUARDED(sum_into);
  TRIDENT_GUARDED(convert);
  TRIDENT_GUARDED(store);
  TRIDENT_GUARDED(round_to);
  TRIDENT_GUARDED(narrow);
  TRIDENT_GUARDED(linear_forward);
  TRIDENT_GUARDED(linear_backward);
  TRIDENT_GUARDED(bias_gradient);
  TRIDENT_GUARDED(linear_gelu_forward);
  TRIDENT_GUARDED(linear_gelu_backward);
  TRIDENT_GUARDED(strided_matmul);
  TRIDENT_GUARDED(batched_matmul);
  TRIDENT_GUARDED(batched_matmul_bf16);
  TRIDENT_GUARDED(strided_matmul_bf16);
  TRIDENT_GUARDED(prepare_linear);
  TRIDENT_GUARDED(prepare_attention);
  TRIDENT_GUARDED(layernorm_forward);
  TRIDENT_GUARDED(layernorm_backward);
  TRIDENT_GUARDED(gelu_forward);
  TRIDENT_GUARDED(gelu_backward);
  TRIDENT_GUARDED(residual_forward);
  TRIDENT_GUARDED(bias_residual_forward);
  TRIDENT_GUARDED(add_inplace);
  TRIDENT_GUARDED(attention_forward);
  TRIDENT_GUARDED(attention_backward);
  TRIDENT_GUARDED(attention_forward_bf16);
  TRIDENT_GUARDED(attention_backward_bf16);
  TRIDENT_GUARDED(attention_decode);
  TRIDENT_GUARDED(flash_attention_forward);
  TRIDENT_GUARDED(flash_attention_backward);
  TRIDENT_GUARDED(flash_attention_block_forward);
  TRIDENT_GUARDED(flash_attention_block_backward);
  TRIDENT_GUARDED(copy_columns);
  TRIDENT_GUARDED(rmsnorm_forward);
  TRIDENT_GUARDED(rmsnorm_backward);
  TRIDENT_GUARDED(rope);
  TRIDENT_GUARDED(swiglu_forward);
  TRIDENT_GUARDED(swiglu_backward);
  TRIDENT_GUARDED(expand_kv);
  TRIDENT_GUARDED(reduce_kv);
  TRIDENT_GUARDED(embedding_forward);
  TRIDENT_GUARDED(embedding_backward);
  TRIDENT_GUARDED(positions_forward);
  TRIDENT_GUARDED(positions_backward);
  TRIDENT_GUARDED(crossentropy_row_max);
  TRIDENT_GUARDED(crossentropy_row_sums);
  TRIDENT_GUARDED(crossentropy_losses);
  TRIDENT_GUARDED(crossentropy_backward);
  TRIDENT_GUARDED(crossentropy_forward_backward);
  TRIDENT_GUARDED(adamw_update);
  TRIDENT_GUARDED(sums_of_squares);
  TRIDENT_GUARDED(sums_of_squares_into);
  TRIDENT_GUARDED(mean_losses_into);
  TRIDENT_GUARDED(step_control);
  return t;
}

#undef TRIDENT_GUARDED

class GuardBackend final : public Backend {
 public:
  Device device() const override { return Device{DeviceKind::guard, 0}; }
  // Device memory is guarded; host and pinned memory are the host's (staging goes through them).
  void* allocate(size_t bytes, MemoryKind kind) override {
    if (kind != MemoryKind::device) return host_allocator().allocate(bytes, kind);
    return guard().map(bytes);
  }
  void release(void* pointer, size_t bytes, MemoryKind kind) override {
    if (kind != MemoryKind::device) return host_allocator().release(pointer, bytes, kind);
    guard().unmap(pointer);
  }
  const char* name() const override { return "guard"; }
  int64_t host_reads() const override { return g_host_reads.load(); }
  const KernelTable& kernels() const override { return table_; }
  std::string unavailable_reason() const override { return ""; }
  // Graphs as CUDA's: recorded on the capturing thread, replayed in order (the stream is the
  // host's, so a replay has finished when it returns).
  std::string graphs_unavailable() const override { return ""; }
  void* capture_graph(Stream, const std::function<void()>& enqueue) override {
    auto graph = std::make_unique<RecordedGraph>();
    if (t_recording != nullptr) throw std::logic_error("kernels.device = guard: a capture inside a capture");
    t_recording = &graph->calls;
    try {
      enqueue();
    } catch (...) {
      t_recording = nullptr;
      throw;
    }
    t_recording = nullptr;
    return graph.release();
  }
  void launch_graph(void* graph, Stream) override {
    for (const std::function<void()>& call : static_cast<RecordedGraph*>(graph)->calls) call();
  }
  void destroy_graph(void* graph) override { delete static_cast<RecordedGraph*>(graph); }

 private:
  const KernelTable table_ = make_table();
};

}  // namespace

Backend& backend() {
  static GuardBackend instance;
  return instance;
}

}  // namespace trident::kernels::guard
