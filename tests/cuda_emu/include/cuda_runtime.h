// The CUDA emulator's runtime header (tests/cuda_emu/README.md): what the CUDA backend's host code
// and its kernels use of CUDA's, for a build that runs the kernels on this CPU. The host API
// (memory, streams, events, graphs, device queries) is implemented in tests/cuda_emu/runtime.cpp;
// the device side is the built-in variables, barriers, warp shuffles and intrinsics below, which
// a kernel — compiled as plain C++ from the .cu file that tests/cuda_emu/translate.py rewrote —
// calls from the fiber that plays its thread.
#pragma once

#include <math.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#define CUDART_VERSION 13000
#define __CUDA_ARCH_LIST__ 800, 900

// ---- Qualifiers: functions are plain C++. __shared__ declarations are rewritten by translate.py
// into references to the running block's shared memory (cuda_emu::block_shared); one left over
// does not compile.
#define __shared__ __shared___declaration_not_rewritten_by_translate_py
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

// ---- Types --------------------------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
};
using cudaError = cudaError_t;

struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUmemPoolHandle_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
using cudaMemPool_t = CUmemPoolHandle_st*;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemPoolAttr {
  cudaMemPoolAttrReleaseThreshold = 4,
  cudaMemPoolAttrReservedMemCurrent = 5,
  cudaMemPoolAttrUsedMemHigh = 8
};
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1 };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1 };
constexpr unsigned cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDisableTiming = 2;

struct cudaUUID_t {
  char bytes[16];
};
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
};
struct cudaFuncAttributes {
  size_t sharedSizeBytes;
  int maxThreadsPerBlock;
  int maxDynamicSharedSizeBytes;
};

struct uint3 {
  unsigned x, y, z;
};
// The vector types at CUDA's alignments (a misaligned vector access faults on a GPU; under
// -fsanitize=alignment it is reported here).
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// ---- Host API (runtime.cpp), with C linkage as CUDA's ------------------------------------------------
extern "C" {
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);
cudaError_t cudaDeviceGetPCIBusId(char* id, int length, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);

cudaError_t cudaMalloc(void** pointer, size_t bytes);
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMallocHost(void** pointer, size_t bytes);
cudaError_t cudaFreeHost(void* pointer);
cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* pointer, int value, size_t bytes);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
using cudaHostFn_t = void (*)(void*);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t function, void* data);
// The emulator's own: an operation that may finish after the host call that reaches it, as a GPU's
// kernel waiting for a peer does while the host goes on (the emulated NCCL's receives). Each time
// the stream reaches it, start(data) begins it and returns its state, and poll(state) is called
// until it answers nonzero (done: it releases the state); the stream's later work waits for it.
// release(data) once no stream or graph holds the operation.
using cudaEmuStart = void* (*)(void* data);
using cudaEmuPoll = int (*)(void* state);
using cudaEmuRelease = void (*)(void* data);
cudaError_t cudaEmuLaunchPolled(cudaStream_t stream, cudaEmuStart start, cudaEmuPoll poll, cudaEmuRelease release,
                                void* data);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* executable, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t executable, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t executable);
}  // extern "C"

template <class T>
cudaError_t cudaMalloc(T** pointer, size_t bytes) {  // CUDA's typed overload
  return cudaMalloc(reinterpret_cast<void**>(pointer), bytes);
}

namespace cuda_emu {
cudaError_t set_function_shared(const void* function, int bytes);
cudaError_t function_attributes(cudaFuncAttributes* attributes, const void* function);
}  // namespace cuda_emu
template <class Function>
cudaError_t cudaFuncSetAttribute(Function* function, cudaFuncAttribute, int bytes) {
  return cuda_emu::set_function_shared(reinterpret_cast<const void*>(function), bytes);
}
template <class Function>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, Function* function) {
  return cuda_emu::function_attributes(attributes, reinterpret_cast<const void*>(function));
}

// ---- Kernel execution (runtime.cpp) -------------------------------------------------------------
namespace cuda_emu {

// One emulated thread's built-in variables.
struct ThreadPlace {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
// The running thread (fiber): its built-in variables and its lane. Set at each resume.
struct Running {
  ThreadPlace place;
  int lane = 0;
};
extern thread_local Running* t_running;
inline const ThreadPlace& place() { return t_running->place; }

// A launch's configuration, as <<<grid, block, shared bytes, stream>>> gives it.
struct Launch {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
  Launch(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = nullptr) : grid(g), block(b), shared(s), stream(st) {}
};

// Runs body() as every thread of the grid (or records it, where the stream is being captured);
// `kernel` names it in messages, `function` is its address (what cudaFuncSetAttribute names). The
// arguments are evaluated once, at the launch, as CUDA's are.
struct KernelBody {
  virtual ~KernelBody() = default;
  virtual void run() = 0;
};
void enqueue(const Launch& launch, const char* kernel, const void* function, KernelBody* body);  // takes ownership
// A kernel's address where its name gives one (a function, a pointer to one, a template with its
// arguments), else nullptr (a template whose arguments the launch deduces): the probe's return
// type fails to form, and the fallback is taken.
template <class Function, class Zero>
const void* address_of(Function* function, Zero) {
  return reinterpret_cast<const void*>(function);
}
template <class Probe>
auto kernel_address(Probe probe, int) -> decltype(probe(0)) {
  return probe(0);
}
template <class Probe>
const void* kernel_address(Probe, long) {
  return nullptr;
}

template <class Body, class... Args>
struct BoundKernel final : KernelBody {
  Body body;
  std::tuple<std::decay_t<Args>...> args;
  BoundKernel(Body b, Args&&... a) : body(std::move(b)), args(std::forward<Args>(a)...) {}
  void run() override {
    std::apply([this](auto&... a) { body(a...); }, args);
  }
};
template <class Body, class... Args>
void launch(const Launch& config, const char* kernel, const void* function, Body body, Args&&... args) {
  enqueue(config, kernel, function, new BoundKernel<Body, Args...>(std::move(body), std::forward<Args>(args)...));
}

void* dynamic_shared_bytes();  // the running block's dynamic shared memory
template <class T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_bytes());
}
// The running block's `__shared__ T name;` of the declaration `site` (a static of its own):
// placed at the block's first use, the same object for all its threads, and like all shared
// memory NaN bytes (0xff) when the block starts.
void* block_shared_bytes(const void* site, size_t bytes, size_t alignment);
template <class T>
T& block_shared(const void* site) {
  return *static_cast<T*>(block_shared_bytes(site, sizeof(T), alignof(T)));
}
// The order of the blocks of a grid and the threads of a block (TRIDENT_CUDA_EMU_ORDER=reverse
// sets the reverse at start-up): a race between threads gives other values in the other order.
void set_reverse_order(bool reverse);

// Barriers: the block's (__syncthreads) and a warp's lanes in `mask` (__syncwarp, the shuffles,
// mma_sync). A warp operation is one barrier: each lane brings its `part`, and the lane whose
// arrival completes the barrier runs `operation` once over the parts of every lane there (a bit
// of `lanes` each) before any of them goes on — so no part is overwritten while another lane
// still reads it, and the warp's work is done once, not once a lane.
using WarpOperation = void (*)(void* const* parts, uint32_t lanes);
void sync_block();
void meet_warp(unsigned mask, void* part, WarpOperation operation);
inline void sync_warp(unsigned mask) { meet_warp(mask, nullptr, nullptr); }
// Fails the running kernel's launch with `what` (a warp operation used as CUDA forbids).
void kernel_error(const char* what);
inline int lane_id() { return t_running->lane; }

// A shuffle: each lane's value and the lane it reads; the result written at the barrier.
struct ShufflePart {
  uint64_t value;
  int source;
  uint64_t result;
};
inline void shuffle_lanes(void* const* parts, uint32_t lanes) {
  for (int l = 0; l < 32; ++l) {
    if (!(lanes & (1u << l))) continue;
    auto* p = static_cast<ShufflePart*>(parts[l]);
    if (lanes & (1u << p->source)) {
      p->result = static_cast<const ShufflePart*>(parts[p->source])->value;
    } else {  // undefined on a GPU
      p->result = p->value;
      kernel_error("a shuffle reads a lane that is not at it (outside its mask, or returned)");
    }
  }
}
template <class T>
T shuffle(unsigned mask, T value, int source) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  ShufflePart part{0, source & 31, 0};
  std::memcpy(&part.value, &value, sizeof(T));
  meet_warp(mask, &part, shuffle_lanes);
  T out;
  std::memcpy(&out, &part.result, sizeof(T));
  return out;
}

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::place().thread)
#define blockIdx (::cuda_emu::place().block)
#define blockDim (::cuda_emu::place().block_dim)
#define gridDim (::cuda_emu::place().grid_dim)

inline void __syncthreads() { cuda_emu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { cuda_emu::sync_warp(mask); }

// Shuffles within segments of `width` lanes, as CUDA's: a source outside the caller's segment
// wraps into it.
template <class T>
T __shfl_sync(unsigned mask, T value, int source, int width = 32) {
  const int lane = cuda_emu::lane_id();
  return cuda_emu::shuffle(mask, value, (lane & ~(width - 1)) + (source & (width - 1)));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  const int lane = cuda_emu::lane_id();
  int source = lane ^ lane_mask;
  if ((source & ~(width - 1)) != (lane & ~(width - 1))) source = lane;  // outside the segment: its own
  return cuda_emu::shuffle(mask, value, source);
}

// Memory fences and atomics (the gradient norm's single-kernel sum: kernels/cuda/elementwise.cu).
// A grid's blocks run one after another and a block's threads are fibers of one host thread, so a
// fence has nothing to order here and an atomic is one read-modify-write; both are the host's own.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* address, unsigned value) {
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}

// ---- Intrinsics ---------------------------------------------------------------------------------
namespace cuda_emu {
template <class To, class From>
To bits_as(From from) {
  static_assert(sizeof(To) == sizeof(From), "a reinterpretation of the same bytes");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
}  // namespace cuda_emu
inline float __uint_as_float(unsigned bits) { return cuda_emu::bits_as<float>(bits); }
inline float __int_as_float(int bits) { return cuda_emu::bits_as<float>(bits); }
inline unsigned __float_as_uint(float f) { return cuda_emu::bits_as<unsigned>(f); }
// CUDA's integer min (the kernels' own loop bounds; the only one they call).
inline int min(int a, int b) { return a < b ? a : b; }
// expf, logf, fmaxf, sqrtf, … : the C library's (math.h), as in CUDA's global namespace.
