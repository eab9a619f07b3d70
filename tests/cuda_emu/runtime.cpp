// The CUDA emulator's runtime (tests/cuda_emu/README.md): CUDA's host API over this process's
// memory, and the kernels run on the CPU, each CUDA thread a fiber.
//
// Execution. Work is done when it is enqueued, in the enqueuing host thread (a stream is an order
// that is always kept), or held until something needs it (held streams, below), or held behind an
// operation that waits for another process (the emulated NCCL's), except on a stream being
// captured, where it is recorded for the graph's launches. A grid's blocks run one
// after another; a block's threads are fibers, and the lowest-numbered one that can run always
// runs, until it reaches a barrier (__syncthreads, or a warp's: __syncwarp, the shuffles,
// mma_sync) or its end, and hands the turn to the next — so warp 0 runs as far as it can before
// warp 1 starts, the most one warp can run ahead of another on a GPU. A warp operation (a
// shuffle, mma_sync) is one barrier, done once for the warp by the lane that completes it
// (meet_warp).
// A barrier is passed once every live thread it names has reached it; threads that have returned
// count as there. No thread able to run while some wait is a deadlock — threads at barriers that
// cannot all be reached (a barrier in divergent code) — and fails the launch, naming the kernel.
//
// What it checks that a GPU run would only show by chance: TRIDENT_CUDA_EMU_ORDER=reverse runs the
// blocks of a grid and the threads of a block highest-numbered first, so a kernel that reads what
// another thread writes (or overwrites what another still reads) without a barrier between them
// gets the other value in one of the two orders; shared memory starts each block as NaNs, so
// reading it before writing shows; TRIDENT_CUDA_EMU_STREAMS=deferred holds each stream's work
// until it is needed (main-late: the main stream's alone), so a stream that reads another's result
// without an event between them reads it unwritten; an NCCL operation finishes only while the host
// asks or waits, so a stream that reads what it receives without waiting for it reads it unwritten.
// What it does not: speed, kernels of two streams truly at once, the memory model beyond
// barriers, and the tensor cores' own rounding.
#include <cuda_runtime.h>
#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// An operation of a stream: runs it, or goes on with it; true once it is done (false: it waits for
// something outside this process, and is called again).
using Step = std::function<bool()>;

// The handles' types, opaque to the callers.
struct CUstream_st {
  unsigned flags = 0;
  // The work enqueued and not yet run (held: below), and how much of the stream's work has been
  // enqueued and run in all; whether its first operation is running.
  std::deque<Step> pending;
  uint64_t enqueued = 0, done = 0;
  bool running = false;
};
struct CUevent_st {
  double seconds = 0.0;
  bool recorded = false;
  // Where a deferred stream reaches it: that stream and its work up to then; its records still
  // held, and whether it was destroyed before they ran (the last of them deletes it, as CUDA
  // releases an event destroyed before it completes).
  cudaStream_t stream = nullptr;
  uint64_t reached_at = 0;
  int held_records = 0;
  bool destroyed = false;
};
struct CUgraph_st {
  std::vector<Step> operations;
  std::vector<void*> owned;  // stream-ordered memory allocated while capturing: the graph's
};
struct CUgraphExec_st {
  CUgraph_st graph;
};
struct CUmemPoolHandle_st {
  int device = 0;
};

namespace cuda_emu {
namespace {

constexpr int kWarp = 32;
// A fiber's stack: 64 KiB (the kernels' frames are small), 32 to a 2 MiB region. No guard page
// between them: the lowest bytes of each hold a canary, checked after each block.
constexpr size_t kFiberStack = 64 << 10;
constexpr size_t kStackRegion = 2 << 20;
constexpr uint64_t kCanary = 0x5afe57ac6a9ded00ull;
constexpr size_t kSharedOptIn = 227 << 10;  // an H100's dynamic shared memory per block, opted in
constexpr size_t kSharedDefault = 48 << 10;
constexpr int kMultiprocessors = 132;  // an H100's

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::atomic<bool> g_reverse{[] {
  const char* order = std::getenv("TRIDENT_CUDA_EMU_ORDER");
  return order != nullptr && std::string(order) == "reverse";
}()};
bool reverse_order() { return g_reverse.load(std::memory_order_relaxed); }

int device_count() {
  static const int count = [] {
    const char* n = std::getenv("TRIDENT_CUDA_EMU_GPUS");
    return n != nullptr ? std::atoi(n) : 1;
  }();
  return count;
}

bool valid_device(int device) { return device >= 0 && device < device_count(); }

size_t device_memory() {
  static const size_t bytes = [] {
    const char* gb = std::getenv("TRIDENT_CUDA_EMU_MEMORY_GB");
    return static_cast<size_t>((gb != nullptr ? std::atof(gb) : 80.0) * (1ull << 30));
  }();
  return bytes;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;
// A kernel that failed (a deadlock, an exception): the next synchronization's error, once — a
// GPU's context would stay broken, but a test run learns more by going on to its next check.
thread_local cudaError_t t_kernel_failure = cudaSuccess;
cudaError_t take_kernel_failure() {
  const cudaError_t e = t_kernel_failure;
  t_kernel_failure = cudaSuccess;
  return e;
}

cudaError_t fail(cudaError_t error) {
  t_last_error = error;
  return error;
}

// ---- Memory --------------------------------------------------------------------------------------

struct Memory {
  std::mutex mutex;
  std::map<void*, size_t> device;  // cudaMalloc's and cudaMallocAsync's
  std::map<void*, size_t> pinned;  // cudaMallocHost's
  size_t in_use = 0, async_in_use = 0, async_high = 0;
};
Memory& memory() {
  static Memory* m = new Memory();
  return *m;
}

void* allocate(size_t bytes, bool async) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (m.in_use + bytes > device_memory()) return nullptr;
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (p == nullptr) return nullptr;
  m.device[p] = bytes;
  m.in_use += bytes;
  if (async) {
    m.async_in_use += bytes;
    if (m.async_in_use > m.async_high) m.async_high = m.async_in_use;
  }
  return p;
}

// Whether p lies in none of cudaMalloc's, cudaMallocAsync's or cudaMallocHost's allocations.
bool pageable(const void* p) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  for (const auto* allocations : {&m.device, &m.pinned}) {
    auto it = allocations->upper_bound(const_cast<void*>(p));
    if (it == allocations->begin()) continue;
    --it;
    if (static_cast<const unsigned char*>(p) < static_cast<const unsigned char*>(it->first) + it->second) return false;
  }
  return true;
}

bool release(void* p, bool async) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  const auto it = m.device.find(p);
  if (it == m.device.end()) return false;
  m.in_use -= it->second;
  if (async) m.async_in_use -= std::min(m.async_in_use, it->second);
  m.device.erase(it);
  std::free(p);
  return true;
}

// ---- Streams and capture --------------------------------------------------------------------------

struct Capture {
  cudaStream_t stream = nullptr;
  std::unique_ptr<CUgraph_st> graph;
  cudaError_t error = cudaSuccess;
};
thread_local Capture* t_capture = nullptr;

// Held streams. TRIDENT_CUDA_EMU_STREAMS=deferred: work on a stream — the legacy default
// stream's too — is held until something needs it done: a synchronization of the stream, of an
// event on it or of the device, a query of such an event, a synchronous copy or free, a copy into
// pageable memory, another stream's work that waits for it (an event, or the legacy stream's
// implicit order with the blocking streams) — and then run in that thread. So a non-blocking
// stream's work runs long before or after work enqueued earlier or later on another, and a
// stream that reads what another writes without waiting for it reads it unwritten: the missing
// wait shows, where running every operation as it is enqueued keeps all streams in one order and
// hides it. TRIDENT_CUDA_EMU_STREAMS=main-late holds the legacy and blocking streams' work alone
// (a program's main stream: the legacy one, or the blocking one it captures graphs on) and runs
// the non-blocking streams' at once: a side stream (communication's) that reads what the main
// stream writes without waiting for it reads it before it is written — where deferred streams,
// holding both, may run the main stream first whenever the host waits.
enum class Held { none, all, main };
Held held_streams() {
  static const Held held = [] {
    const char* mode = std::getenv("TRIDENT_CUDA_EMU_STREAMS");
    const std::string m = mode != nullptr ? mode : "";
    return m == "deferred" ? Held::all : m == "main-late" ? Held::main : Held::none;
  }();
  return held;
}

// Work that waits for something outside this process — the emulated NCCL's operations, until
// their peers' messages are here (cudaEmuLaunchPolled) — holds its stream's later work behind it
// in either mode while the host goes on, as a GPU's kernel waiting for a peer holds its stream and
// not the host; so does a stream's wait for an event whose work is held. Held work goes on as far
// as it can whenever the host enqueues work (immediate mode) or asks whether some is done; a host
// that waits for it polls it, and meanwhile lets every stream's held work go on, as a GPU runs
// them all. Such an operation is begun when its stream reaches it, but finishes only while the
// host asks or waits (t_host_asks) — as late as a GPU might finish it: so work on another stream
// that reads its result with no event between them reads it unwritten, whatever the timing.
std::recursive_mutex g_streams_mutex;  // the streams' queues and the running of held work
std::vector<cudaStream_t> g_streams;   // the created streams
CUstream_st g_legacy;                  // the legacy default stream's held work (stream nullptr)
cudaStream_t held_stream(cudaStream_t stream) { return stream != nullptr ? stream : &g_legacy; }
bool blocking(cudaStream_t stream) { return !(stream->flags & cudaStreamNonBlocking); }
// Whether the stream's work is held until something needs it (above).
bool holds(cudaStream_t stream) {
  const Held held = held_streams();
  return held == Held::all || (held == Held::main && (stream == nullptr || blocking(stream)));
}

// Whether this thread is in a query or a wait of the host (cudaEmuLaunchPolled's operations
// finish only then).
thread_local int t_host_asks = 0;
struct HostAsks {
  HostAsks() { ++t_host_asks; }
  ~HostAsks() { --t_host_asks; }
};

// Goes on with the stream's held work until `until` operations of it have run: false where one
// cannot finish yet (it stays first, and what follows stays held).
bool advance(cudaStream_t stream, uint64_t until) {
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  stream = held_stream(stream);
  while (stream->done < until && !stream->pending.empty()) {
    if (stream->running) {  // its first operation waits, through others, for the stream itself
      std::fprintf(stderr, "cuda_emu: streams wait for each other in a cycle\n");
      std::abort();
    }
    Step step = std::move(stream->pending.front());
    stream->pending.pop_front();
    stream->running = true;
    const bool finished = step();
    stream->running = false;
    if (!finished) {
      stream->pending.push_front(std::move(step));
      return false;
    }
    ++stream->done;
  }
  return true;
}
// Every stream's held work as far as it goes now, or (unheld_only) that of the streams whose work
// is not held until needed.
void progress(bool unheld_only = false) {
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  if (!unheld_only || !holds(nullptr)) advance(&g_legacy, UINT64_MAX);
  for (size_t i = 0; i < g_streams.size(); ++i)
    if (!unheld_only || !holds(g_streams[i])) advance(g_streams[i], UINT64_MAX);
}
// One poll of the host: reached() now, or after every stream's held work went on (a host that
// polls may be waiting for a peer that waits for this rank's other streams).
template <class Reached>
bool poll_once(const Reached& reached) {
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  const HostAsks asks;
  if (reached()) return true;
  progress();
  return reached();
}
// The host waits until reached() — which goes on with the work it needs — letting every stream's
// held work go on meanwhile; between polls other host threads may enqueue and wait.
template <class Reached>
void wait_for(const Reached& reached) {
  while (!poll_once(reached)) std::this_thread::sleep_for(std::chrono::microseconds(50));
}
void finish(cudaStream_t stream) {
  wait_for([stream] { return advance(stream, UINT64_MAX); });
}
// Every stream's held work done, or the legacy and blocking streams' alone.
void finish_all(bool blocking_only) {
  std::vector<cudaStream_t> streams;
  {
    std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
    streams = g_streams;
  }
  finish(nullptr);
  for (cudaStream_t stream : streams)
    if (!blocking_only || blocking(stream)) finish(stream);
}
// Whether the stream may have work not yet run.
bool holding(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  return holds(stream) || held_stream(stream)->done < held_stream(stream)->enqueued;
}
// An operation that lets its stream go on once `other` has run `until` operations.
Step waiting_for(cudaStream_t other, uint64_t until) {
  return [other, until] { return advance(other, until); };
}
// Reached: the stream's work up to the event's record has run (on held streams, it goes on now
// as far as it can: a GPU gets there while the host polls, and a poll that never ran it would wait
// for ever).
bool reached(cudaEvent_t event) { return event->stream == nullptr || advance(event->stream, event->reached_at); }

void enqueue_held(cudaStream_t stream, Step operation) {
  cudaStream_t held = held_stream(stream);
  held->pending.push_back(std::move(operation));
  ++held->enqueued;
}

// Runs `operation` now, or records it where `stream` is being captured, or holds it (deferred
// streams, or work before it on the stream not done). The legacy stream's work follows the
// blocking streams' earlier work, and theirs the legacy stream's: where that is held, the new
// work waits for it there. An operation on the legacy stream while this thread captures a blocking
// stream would be ordered with the captured work: that invalidates the capture, as CUDA's does.
cudaError_t submit_step(cudaStream_t stream, Step operation) {
  if (t_capture != nullptr) {
    if (stream == t_capture->stream) {
      t_capture->graph->operations.push_back(std::move(operation));
      return cudaSuccess;
    }
    if (stream == nullptr && !(t_capture->stream->flags & cudaStreamNonBlocking)) {
      t_capture->error = cudaErrorStreamCaptureInvalidated;
      return fail(cudaErrorStreamCaptureImplicit);
    }
  }
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  if (stream == nullptr) {
    for (cudaStream_t other : g_streams)
      if (blocking(other) && other->done < other->enqueued) enqueue_held(nullptr, waiting_for(other, other->enqueued));
  } else if (blocking(stream) && g_legacy.done < g_legacy.enqueued) {
    enqueue_held(stream, waiting_for(&g_legacy, g_legacy.enqueued));
  }
  enqueue_held(stream, std::move(operation));
  if (!holds(stream)) {
    advance(stream, UINT64_MAX);
    progress(true);
  }
  return cudaSuccess;
}
cudaError_t submit(cudaStream_t stream, std::function<void()> operation) {
  return submit_step(stream, [operation = std::move(operation)] {
    operation();
    return true;
  });
}

bool capturing(cudaStream_t stream) { return t_capture != nullptr && stream == t_capture->stream; }

// ---- Kernels ---------------------------------------------------------------------------------------

// Switching between fibers. On x86-64 a switch of our own: the callee-saved registers pushed on
// the old stack, the stack pointers swapped (the floating-point control words are not kept: all
// fibers run with the thread's, which no kernel changes). glibc's swapcontext also saves the
// signal mask, a system call per switch: with it, swapcontext and the kernel's side of that call
// took 90% of a training run's time (perf). Elsewhere, ucontext.
// A stack's lowest address and size.
struct Stack {
  void* bottom = nullptr;
  size_t size = 0;
};
#if defined(__x86_64__)
extern "C" void cuda_emu_switch(void** save_stack, void* next_stack);
asm(R"(
.text
.globl cuda_emu_switch
.type cuda_emu_switch,@function
cuda_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size cuda_emu_switch,.-cuda_emu_switch
)");
struct Context {
  void* stack = nullptr;
  Stack bounds;
};
void switch_stacks(Context& from, Context& to) { cuda_emu_switch(&from.stack, to.stack); }
// A new fiber's stack as cuda_emu_switch leaves an old one: six registers, and `entry` as the
// address to return to (at a 16-byte boundary minus 8, as after a call).
void start_context(Context& c, void* stack, size_t bytes, void (*entry)()) {
  auto* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15));
  *--top = 0;  // no return from entry
  *--top = reinterpret_cast<uint64_t>(entry);
  for (int r = 0; r < 6; ++r) *--top = 0;
  c.stack = top;
  c.bounds = {stack, bytes};
}
#else
struct Context {
  ucontext_t context;
  Stack bounds;
};
void switch_stacks(Context& from, Context& to) { swapcontext(&from.context, &to.context); }
void start_context(Context& c, void* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.context);
  c.context.uc_stack.ss_sp = stack;
  c.context.uc_stack.ss_size = bytes;
  c.context.uc_link = nullptr;
  makecontext(&c.context, entry, 0);
  c.bounds = {stack, bytes};
}
#endif

// Under AddressSanitizer (EMU_ASAN=1, make test-cuda-emu-asan: tests/cuda_emu/README.md) each switch tells it the
// stack it goes to, and a fiber's stack starts clean of the poison a kernel's abandoned frames
// (a deadlocked block's) left on it; otherwise a plain switch.
void switch_to(Context& from, Context& to) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to.bounds.bottom, to.bounds.size);
  switch_stacks(from, to);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  switch_stacks(from, to);
#endif
}
// A new fiber's first step on its stack: the switch that brought it there finished.
void entered_fiber() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}
void clean_stack(void* stack, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(stack, bytes);
#else
  (void)stack, (void)bytes;
#endif
}
// The calling thread's own stack (the scheduler's context runs on it).
Stack thread_stack() {
  pthread_attr_t attributes;
  Stack s;
  if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
    pthread_attr_getstack(&attributes, &s.bottom, &s.size);
    pthread_attr_destroy(&attributes);
  }
  return s;
}

// What a fiber waits for: nothing (it runs when its turn comes), the block's barrier, or one of
// its warp's.
enum class Wait { none, block, warp };

struct Fiber {
  Context context;
  void* stack = nullptr;
  Running running;  // place, lane
  int warp = 0;
  bool done = false;
  Wait wait = Wait::none;
  size_t warp_barrier = 0;  // which of its warp's barriers, where wait is Wait::warp
};

// A warp's barriers: one per mask in use at once (two half-warps may each meet on their own), and
// the lanes that have returned, which count as there.
struct WarpBarrier {
  uint32_t mask = 0, arrived = 0;
  uint32_t with_parts = 0;  // the arrived lanes that brought a part of `operation`
  WarpOperation operation = nullptr;
};
struct Warp {
  uint32_t exited = 0;
  std::vector<WarpBarrier> barriers;
  void* parts[kWarp] = {};  // each lane's part of the warp operation it waits at (meet_warp)
};

// A block's static shared memory (its __shared__ declarations), placed at their first use.
struct StaticShared {
  alignas(128) unsigned char bytes[kSharedDefault];
  size_t used = 0;
  std::vector<std::pair<const void*, size_t>> sites;  // declaration, offset
};

struct Block {
  KernelBody* body = nullptr;
  StaticShared* statics = nullptr;
  std::vector<Fiber>* fibers = nullptr;
  std::vector<Warp> warps;
  int threads = 0, live = 0, current = 0;
  int arrived = 0;  // at the block's barrier
  // The scheduler's position of a thread (its number, or the reverse), and the lowest position a
  // barrier released since the scheduler last looked.
  bool reverse = false;
  int released = 0;
  int first = 0;  // the scheduler's position that the search for the next thread starts from
  int position(int t) const { return reverse ? threads - 1 - t : t; }
  void note_released(int t) { released = std::min(released, position(t)); }
  unsigned char* shared = nullptr;  // the dynamic shared memory
  size_t dynamic_bytes = 0, shared_limit = 0;  // its size; the most static and dynamic may take together
  Context scheduler;
  std::string failure;
};
thread_local Block* t_block = nullptr;
thread_local StaticShared t_statics;

struct FiberPool {
  std::vector<Fiber> fibers;
  std::vector<void*> regions;
  ~FiberPool() {
    for (void* r : regions) std::free(r);
  }
  std::vector<Fiber>& at_least(size_t n) {
    while (fibers.size() < n) {
      void* region = std::aligned_alloc(kStackRegion, kStackRegion);
      if (region == nullptr) throw std::runtime_error("cuda_emu: no memory for the fibers' stacks");
      regions.push_back(region);
      for (size_t at = 0; at < kStackRegion; at += kFiberStack) {
        fibers.emplace_back();
        fibers.back().stack = static_cast<char*>(region) + at;
      }
    }
    return fibers;
  }
};

bool canary_intact(const Fiber& f) { return *static_cast<const uint64_t*>(f.stack) == kCanary; }
thread_local FiberPool t_pool;

Fiber& current_fiber() { return (*t_block->fibers)[static_cast<size_t>(t_block->current)]; }

// The first thread in the order that can run, or -1 where none can. The threads before `first`
// wait at barriers or have returned, and only a barrier's release can change that (note_released).
int next_runnable(Block& b) {
  b.first = std::min(b.first, b.released);
  b.released = b.threads;
  for (; b.first < b.threads; ++b.first) {
    const int t = b.position(b.first);
    const Fiber& f = (*b.fibers)[static_cast<size_t>(t)];
    if (!f.done && f.wait == Wait::none) return t;
  }
  return -1;
}

// From the running fiber (at a barrier, or returned) straight to the next that can run — not
// through the scheduler, which would double the switches — or back to the scheduler where none
// can: the block has ended, or is deadlocked.
void yield() {
  Block& b = *t_block;
  Context& from = current_fiber().context;
  const int t = next_runnable(b);
  if (t < 0) return switch_to(from, b.scheduler);
  Fiber& next = (*b.fibers)[static_cast<size_t>(t)];
  b.current = t;
  t_running = &next.running;
  switch_to(from, next.context);
}

void release_warp_if_met(Block& b, int warp) {
  Warp& w = b.warps[static_cast<size_t>(warp)];
  for (size_t i = 0; i < w.barriers.size(); ++i) {
    WarpBarrier& barrier = w.barriers[i];
    if (barrier.arrived == 0 || ((barrier.arrived | w.exited) & barrier.mask) != barrier.mask) continue;
    if (barrier.with_parts != 0) barrier.operation(w.parts, barrier.with_parts);
    barrier.with_parts = 0;
    barrier.arrived = 0;
    for (int lane = 0; lane < kWarp; ++lane) {
      const int t = warp * kWarp + lane;
      if (t >= b.threads) break;
      Fiber& f = (*b.fibers)[static_cast<size_t>(t)];
      if (f.wait == Wait::warp && f.warp_barrier == i) f.wait = Wait::none, b.note_released(t);
    }
  }
}

void release_block_if_met(Block& b) {
  if (b.arrived == 0 || b.arrived != b.live) return;
  b.arrived = 0;
  for (int t = 0; t < b.threads; ++t) {
    Fiber& f = (*b.fibers)[static_cast<size_t>(t)];
    if (f.wait == Wait::block) f.wait = Wait::none, b.note_released(t);
  }
}

void fiber_main() {
  entered_fiber();
  Block& b = *t_block;
  Fiber& f = current_fiber();
  try {
    b.body->run();
  } catch (const std::exception& e) {
    if (b.failure.empty()) b.failure = std::string("threw: ") + e.what();
  } catch (...) {
    if (b.failure.empty()) b.failure = "threw";
  }
  f.done = true;
  --b.live;
  b.warps[static_cast<size_t>(f.warp)].exited |= 1u << f.running.lane;
  release_warp_if_met(b, f.warp);
  release_block_if_met(b);
  yield();
}

std::string deadlock(const Block& b) {
  std::string where;
  for (int t = 0; t < b.threads && where.size() < 400; ++t) {
    const Fiber& f = (*b.fibers)[static_cast<size_t>(t)];
    if (!f.done) where += " thread " + std::to_string(t) + (f.wait == Wait::block ? " at __syncthreads;" : " at a warp barrier;");
  }
  return "deadlock: threads wait at barriers that cannot all be reached (a barrier in divergent code):" + where;
}

// Runs one block of the grid to its end; false and b.failure where it cannot end (a deadlock, a
// thread that threw or overflowed its stack).
bool run_block(Block& b, const Launch& launch, uint3 block_index) {
  const dim3 bd = launch.block;
  std::vector<Fiber>& fibers = t_pool.at_least(static_cast<size_t>(b.threads));
  b.fibers = &fibers;
  b.warps.assign(static_cast<size_t>((b.threads + kWarp - 1) / kWarp), Warp{});
  for (int t = b.threads; t % kWarp != 0; ++t) b.warps.back().exited |= 1u << (t % kWarp);  // a partial warp's absent lanes
  b.live = b.threads;
  b.arrived = 0;
  for (int t = 0; t < b.threads; ++t) {
    Fiber& f = fibers[static_cast<size_t>(t)];
    f.running.place = ThreadPlace{{t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y)}, block_index, bd, launch.grid};
    f.running.lane = t % kWarp;
    f.warp = t / kWarp;
    f.done = false;
    f.wait = Wait::none;
    clean_stack(f.stack, kFiberStack);
    *static_cast<uint64_t*>(f.stack) = kCanary;
    start_context(f.context, f.stack, kFiberStack, fiber_main);
  }
  // Always the first thread in the order that can run (next_runnable); the fibers pass the turn
  // among themselves, and it comes back here when none can run.
  b.reverse = reverse_order();
  b.released = b.threads;
  b.first = 0;
  static thread_local const Stack own_stack = thread_stack();
  b.scheduler.bounds = own_stack;
  const int first = next_runnable(b);
  b.current = first;
  t_running = &fibers[static_cast<size_t>(first)].running;
  switch_to(b.scheduler, fibers[static_cast<size_t>(first)].context);
  if (b.live > 0) {
    b.failure = deadlock(b);
    return false;
  }
  for (int t = 0; t < b.threads; ++t)
    if (!canary_intact(fibers[static_cast<size_t>(t)]))
      b.failure = "thread " + std::to_string(t) + " overflowed its fiber's 64 KiB stack";
  return b.failure.empty();
}

void run_grid(const Launch& launch, const char* kernel, size_t shared_limit, KernelBody* body) {
  Block b;
  b.body = body;
  b.dynamic_bytes = launch.shared;
  b.shared_limit = shared_limit;
  b.threads = static_cast<int>(launch.block.x * launch.block.y * launch.block.z);
  b.statics = &t_statics;
  std::vector<unsigned char> shared(launch.shared + 128);
  Block* outer = t_block;
  t_block = &b;
  const dim3 g = launch.grid;
  const size_t blocks = static_cast<size_t>(g.x) * g.y * g.z;
  for (size_t i = 0; i < blocks; ++i) {
    const size_t n = reverse_order() ? blocks - 1 - i : i;
    const uint3 index{static_cast<unsigned>(n % g.x), static_cast<unsigned>((n / g.x) % g.y),
                      static_cast<unsigned>(n / (static_cast<size_t>(g.x) * g.y))};
    std::memset(shared.data(), 0xff, shared.size());  // NaNs: shared memory is not zeroed on a GPU
    b.statics->used = 0;
    b.statics->sites.clear();
    b.shared = shared.data() + (128 - reinterpret_cast<uintptr_t>(shared.data()) % 128) % 128;
    if (!run_block(b, launch, index)) {
      std::fprintf(stderr, "cuda_emu: kernel %s, block (%u, %u, %u): %s\n", kernel, index.x, index.y, index.z,
                   b.failure.c_str());
      t_kernel_failure = cudaErrorLaunchFailure;
      break;
    }
  }
  t_block = outer;
}

}  // namespace

thread_local Running* t_running = nullptr;
void* dynamic_shared_bytes() { return t_block->shared; }

void* block_shared_bytes(const void* site, size_t bytes, size_t alignment) {
  StaticShared& s = *t_block->statics;
  for (const auto& [declared, offset] : s.sites)
    if (declared == site) return s.bytes + offset;
  const size_t offset = (s.used + alignment - 1) / alignment * alignment;
  if (offset + bytes > sizeof s.bytes)
    throw std::runtime_error("cuda_emu: a block's __shared__ declarations exceed 48 KiB of static shared memory");
  if (offset + bytes + t_block->dynamic_bytes > t_block->shared_limit && t_block->failure.empty())
    t_block->failure = std::to_string(offset + bytes) + " bytes of __shared__ declarations and " +
                       std::to_string(t_block->dynamic_bytes) + " of dynamic shared memory exceed the block's " +
                       std::to_string(t_block->shared_limit) + " (48 KiB unless cudaFuncSetAttribute allows more)";
  std::memset(s.bytes + offset, 0xff, bytes);  // NaNs, as the dynamic shared memory
  s.sites.emplace_back(site, offset);
  s.used = offset + bytes;
  return s.bytes + offset;
}

void set_reverse_order(bool reverse) { g_reverse.store(reverse); }

void sync_block() {
  Block& b = *t_block;
  Fiber& f = current_fiber();
  ++b.arrived;
  f.wait = Wait::block;
  release_block_if_met(b);
  if (f.wait != Wait::none) yield();  // the last to arrive goes on at once
}

void meet_warp(unsigned mask, void* part, WarpOperation operation) {
  Block& b = *t_block;
  Fiber& f = current_fiber();
  Warp& w = b.warps[static_cast<size_t>(f.warp)];
  const int lane = f.running.lane;
  if (!(mask & (1u << lane))) {
    kernel_error("a warp barrier whose mask leaves out the calling lane");
    mask |= 1u << lane;
  }
  size_t which = w.barriers.size();
  for (size_t i = 0; i < w.barriers.size(); ++i) {
    if (w.barriers[i].mask == mask) which = i;
    else if (w.barriers[i].arrived != 0 && (w.barriers[i].mask & mask) != 0)
      kernel_error("lanes of a warp wait at once at warp barriers of overlapping masks");
  }
  if (which == w.barriers.size()) w.barriers.push_back(WarpBarrier{mask});
  WarpBarrier& barrier = w.barriers[which];
  if (part != nullptr) {
    if (barrier.with_parts != 0 && barrier.operation != operation)
      kernel_error("lanes of a warp meet at one barrier for different operations (shuffle, mma_sync)");
    w.parts[lane] = part;
    barrier.with_parts |= 1u << lane;
    barrier.operation = operation;
  }
  barrier.arrived |= 1u << lane;
  f.wait = Wait::warp;
  f.warp_barrier = which;
  release_warp_if_met(b, f.warp);
  if (f.wait != Wait::none) yield();  // the last to arrive goes on at once
}

void kernel_error(const char* what) {
  if (t_block->failure.empty()) t_block->failure = what;
}

// The dynamic shared memory each kernel was allowed (cudaFuncSetAttribute), by its address.
std::mutex g_allowed_mutex;
std::map<const void*, size_t> g_allowed_shared;
size_t allowed_shared(const void* function) {
  std::lock_guard<std::mutex> lock(g_allowed_mutex);
  const auto it = g_allowed_shared.find(function);
  return it != g_allowed_shared.end() ? it->second : 0;
}

// A launch CUDA refuses fails here too: more than 1024 threads or a grid out of range
// (cudaErrorInvalidConfiguration), more dynamic shared memory than the kernel was allowed —
// above 48 KiB only after cudaFuncSetAttribute(MaxDynamicSharedMemorySize) — (cudaErrorInvalidValue);
// and a block whose static and dynamic shared memory exceed 48 KiB without it fails as it runs.
void enqueue(const Launch& launch, const char* kernel, const void* function, KernelBody* body) {
  std::shared_ptr<KernelBody> owned(body);
  const dim3 g = launch.grid, bd = launch.block;
  const size_t threads = static_cast<size_t>(bd.x) * bd.y * bd.z;
  if (threads == 0 || threads > 1024 || bd.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535 ||
      launch.shared > kSharedOptIn) {
    std::fprintf(stderr, "cuda_emu: kernel %s: a launch of grid (%u, %u, %u), block (%u, %u, %u), %zu shared bytes is invalid\n",
                 kernel, g.x, g.y, g.z, bd.x, bd.y, bd.z, launch.shared);
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  // A kernel whose address the launch does not know (a template it deduces) is held to the device's limit.
  const size_t allowed = function != nullptr ? allowed_shared(function) : kSharedOptIn;
  const size_t dynamic_limit = allowed > 0 ? allowed : kSharedDefault;
  if (launch.shared > dynamic_limit) {
    std::fprintf(stderr, "cuda_emu: kernel %s: a launch with %zu bytes of dynamic shared memory, more than the %zu "
                 "it may have (above 48 KiB, only what cudaFuncSetAttribute allowed it)\n", kernel, launch.shared,
                 dynamic_limit);
    fail(cudaErrorInvalidValue);
    return;
  }
  const Launch config = launch;
  const size_t limit = allowed > 0 ? kSharedOptIn : kSharedDefault;
  submit(launch.stream, [config, kernel, limit, owned] { run_grid(config, kernel, limit, owned.get()); });
}

// A kernel's opt-in to more than 48 KiB of dynamic shared memory: checked against the device's
// limit, and not remembered (a launch does not know its kernel's address, so it cannot be held to it).
cudaError_t set_function_shared(const void* function, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kSharedOptIn) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(g_allowed_mutex);
  g_allowed_shared[function] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

cudaError_t function_attributes(cudaFuncAttributes* attributes, const void* function) {
  const size_t allowed = allowed_shared(function);
  *attributes = cudaFuncAttributes{0, 1024, static_cast<int>(allowed > 0 ? allowed : kSharedDefault)};
  return cudaSuccess;
}

}  // namespace cuda_emu

using namespace cuda_emu;

// ---- The host API ------------------------------------------------------------------------------------

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorLaunchFailure: return "unspecified launch failure (the emulator said why on stderr)";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return "an emulated CUDA error";
  }
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return t_last_error; }
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "CUDA emulator on the host CPU");
  for (int i = 0; i < 16; ++i) p->uuid.bytes[i] = static_cast<char>(0x70 + i + device);
  p->totalGlobalMem = device_memory();
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = kMultiprocessors;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  if (attribute == cudaDevAttrMultiProcessorCount) *value = kMultiprocessors;
  else if (attribute == cudaDevAttrMaxSharedMemoryPerBlockOptin) *value = static_cast<int>(kSharedOptIn);
  else return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char* id, int length, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  std::snprintf(id, static_cast<size_t>(length), "00000000:%02X:00.0", 0x10 + device);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  finish_all(false);
  return take_kernel_failure();
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  *total = device_memory();
  *free = device_memory() - memory().in_use;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = allocate(bytes, false);
  return *pointer != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  finish_all(false);  // cudaFree waits for the device's work
  return release(pointer, false) ? cudaSuccess : fail(cudaErrorInvalidValue);
}
cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  *pointer = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (*pointer == nullptr) return fail(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(memory().mutex);
  memory().pinned[*pointer] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* pointer) {
  finish_all(false);  // as cudaFree, it waits for the device's work
  {
    std::lock_guard<std::mutex> lock(memory().mutex);
    memory().pinned.erase(pointer);
  }
  std::free(pointer);
  return cudaSuccess;
}
// Stream-ordered memory: allocated at once (the stream's earlier work is done already). While
// capturing, the graph owns it: its address is the same at every launch, and it is released with
// the graph.
cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream) {
  *pointer = allocate(bytes, true);
  if (*pointer == nullptr) return fail(cudaErrorMemoryAllocation);
  if (capturing(stream)) t_capture->graph->owned.push_back(*pointer);
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  if (pointer == nullptr) return cudaSuccess;
  if (capturing(stream)) return cudaSuccess;  // the graph's, released with it
  {
    std::lock_guard<std::mutex> lock(memory().mutex);
    if (memory().device.count(pointer) == 0) return fail(cudaErrorInvalidValue);
  }
  return submit(stream, [pointer] { release(pointer, true); });  // when the stream reaches it
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (t_capture != nullptr) {
    t_capture->error = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureImplicit);
  }
  finish_all(true);  // on the legacy stream
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
// A copy from pageable host memory takes the source at the call and one to it is done by its
// return (CUDA stages pageable memory: such a copy is synchronous for the host buffer); between
// device and pinned memory it is the stream's, whenever that runs.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  if (!capturing(stream) && holding(stream)) {
    if (pageable(dst)) {
      finish(stream);
      std::memmove(dst, src, bytes);
      return cudaSuccess;
    }
    if (pageable(src)) {
      auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                                  static_cast<const unsigned char*>(src) + bytes);
      return submit(stream, [=] { std::memmove(dst, staged->data(), bytes); });
    }
  }
  return submit(stream, [=] { std::memmove(dst, src, bytes); });
}
// On the legacy stream, and done when it returns (for device memory, CUDA's may return before).
cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  const cudaError_t status = cudaMemsetAsync(pointer, value, bytes, nullptr);
  return status != cudaSuccess ? status : cudaStreamSynchronize(nullptr);
}
cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream) {
  return submit(stream, [=] { std::memset(pointer, value, bytes); });
}

namespace {
CUmemPoolHandle_st g_pools[64];
uint64_t g_release_threshold = 0;
}  // namespace
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (!valid_device(device) || device >= 64) return fail(cudaErrorInvalidDevice);
  *pool = &g_pools[device];
  return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t, cudaMemPoolAttr attribute, void* value) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  uint64_t v = 0;
  if (attribute == cudaMemPoolAttrReleaseThreshold) v = g_release_threshold;
  else if (attribute == cudaMemPoolAttrReservedMemCurrent) v = memory().async_in_use;
  else if (attribute == cudaMemPoolAttrUsedMemHigh) v = memory().async_high;
  else return fail(cudaErrorInvalidValue);
  std::memcpy(value, &v, sizeof v);
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr attribute, void* value) {
  if (attribute != cudaMemPoolAttrReleaseThreshold) return fail(cudaErrorInvalidValue);
  std::memcpy(&g_release_threshold, value, sizeof g_release_threshold);
  return cudaSuccess;
}
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  *stream = new CUstream_st{};
  (*stream)->flags = flags;
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  g_streams.push_back(*stream);
  return cudaSuccess;
}
// Its held work runs first: CUDA lets a stream be destroyed with work in flight, which completes.
// The handle itself is kept (a few bytes): an event recorded on it, or another stream's wait for
// such an event, may still name it, as CUDA lets them.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  finish(stream);
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  g_streams.erase(std::remove(g_streams.begin(), g_streams.end(), stream), g_streams.end());
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (capturing(stream)) {
    t_capture->error = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  finish(stream);
  return take_kernel_failure();
}
// Run where the stream is (the emulated cuBLASLt enqueues its GEMMs so). Exported from the
// binary (-Wl,--export-dynamic-symbol) for libcublasLt.so.13 to find.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t function, void* data) {
  return submit(stream, [function, data] { function(data); });
}
// The emulator's own (cuda_runtime.h), exported as cudaLaunchHostFunc for libnccl.so.2: each time
// the stream reaches the operation (a graph's launches each time), start(data) begins it, and
// poll(state) is called while the host asks or waits until it answers nonzero; `release(data)`
// once no stream or graph holds it.
cudaError_t cudaEmuLaunchPolled(cudaStream_t stream, cudaEmuStart start, cudaEmuPoll poll, cudaEmuRelease release,
                                void* data) {
  std::shared_ptr<void> owned(data, release);
  return submit_step(stream, [start, poll, owned, state = static_cast<void*>(nullptr), started = false]() mutable {
    if (!started) state = start(owned.get()), started = true;
    if (t_host_asks == 0 || poll(state) == 0) return false;
    started = false;  // a graph's next launch starts it again
    return true;
  });
}
// The event's work is done already, or (deferred streams) runs now; where it cannot finish yet,
// the waiting stream's later work waits for it there, and the host goes on. While capturing, the
// host waits (a captured wait is not replayed: the capture's streams are ordered at the call).
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (capturing(stream)) {
    wait_for([event] { return reached(event); });
    return cudaSuccess;
  }
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  if (reached(event)) return cudaSuccess;
  return submit_step(stream, waiting_for(event->stream, event->reached_at));
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new CUevent_st{};
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  if (event->held_records > 0) event->destroyed = true;
  else delete event;
  return cudaSuccess;
}
// The host's clock when the stream reaches the event (at once, later where the stream's work is
// held, or at each of the graph's launches).
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> lock(g_streams_mutex);
  if (capturing(stream)) {
    event->stream = nullptr;
    return submit(stream, [event] { event->seconds = now_seconds(), event->recorded = true; });
  }
  ++event->held_records;
  const cudaError_t status = submit(stream, [event] {
    event->seconds = now_seconds();
    event->recorded = true;
    if (--event->held_records == 0 && event->destroyed) delete event;
  });
  if (status != cudaSuccess) {
    --event->held_records;
    return status;
  }
  event->stream = held_stream(stream);
  event->reached_at = event->stream->enqueued;
  return status;
}
// cudaErrorNotReady until its record has run (held work goes on first as far as it can).
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  return poll_once([event] { return reached(event); }) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  wait_for([event] { return reached(event); });
  return take_kernel_failure();
}
cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  if (start == nullptr || end == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  *milliseconds = static_cast<float>(1e3 * (end->seconds - start->seconds));
  return cudaSuccess;
}

// Capture: the stream's operations recorded in this thread (CUDA's thread-local mode; the global
// mode is not emulated), replayed in order at each launch.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (stream == nullptr) return fail(cudaErrorStreamCaptureUnsupported);
  if (t_capture != nullptr) return fail(cudaErrorStreamCaptureUnsupported);
  t_capture = new Capture{stream, std::make_unique<CUgraph_st>(), cudaSuccess};
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = capturing(stream) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (t_capture == nullptr || t_capture->stream != stream) return fail(cudaErrorInvalidValue);
  std::unique_ptr<Capture> capture(t_capture);
  t_capture = nullptr;
  if (capture->error != cudaSuccess) {
    for (void* p : capture->graph->owned) release(p, true);
    *graph = nullptr;
    return fail(capture->error);
  }
  *graph = capture->graph.release();
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* executable, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  *executable = new CUgraphExec_st{};
  (*executable)->graph.operations = graph->operations;
  (*executable)->graph.owned = std::move(graph->owned);  // the memory stays with what runs it
  graph->owned.clear();
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t executable, cudaStream_t stream) {
  if (executable == nullptr) return fail(cudaErrorInvalidValue);
  // Its operations in order, each going on where the last left off: one may wait (cudaEmuLaunchPolled).
  return submit_step(stream, [executable, next = size_t(0)]() mutable {
    std::vector<Step>& operations = executable->graph.operations;
    for (; next < operations.size(); ++next)
      if (!operations[next]()) return false;
    next = 0;
    return true;
  });
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  for (void* p : graph->owned) release(p, true);
  delete graph;
  return cudaSuccess;
}
// A launch of it still held runs first (CUDA lets launched work complete).
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t executable) {
  if (executable == nullptr) return fail(cudaErrorInvalidValue);
  finish_all(false);
  for (void* p : executable->graph.owned) release(p, true);
  delete executable;
  return cudaSuccess;
}
