// The CUDA emulator's own checks (tests/cuda_emu/run.sh): one "PASS emu_selftest_NAME" or
// "FAIL emu_selftest_NAME: why" line each. First what it must catch, as a GPU would only by
// chance — a read of another thread's write with no barrier between them (the two orders differ),
// a write over what another warp still reads (one warp runs ahead of the others),
// a barrier that cannot be met (divergent code), shared memory read before any write (NaN), a
// shuffle that reads a lane outside its mask —
// then that it does what CUDA does: block and warp barriers, shuffles within a warp and within
// half-warps, wmma's products, a captured graph replayed, a bad launch refused, more than 48 KiB
// of shared memory only where a kernel was allowed it; and that work
// which waits for something outside the process holds its stream, not the host.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int failures = 0;

void verdict(const char* name, bool ok, const std::string& why) {
  if (ok) std::printf("PASS emu_selftest_%s\n", name);
  else std::printf("FAIL emu_selftest_%s: %s\n", name, why.c_str());
  failures += !ok;
}

template <class T>
T* device_array(size_t n) {
  void* p = nullptr;
  cudaMalloc(&p, n * sizeof(T));
  cudaMemsetAsync(p, 0, n * sizeof(T));
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_copy(const T* device, size_t n) {
  std::vector<T> out(n);
  cudaMemcpyAsync(out.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaStreamSynchronize(nullptr);
  return out;
}

// Each thread writes its slot and reads its neighbour's: with `ordered`, a barrier between.
__global__ void neighbours(int* out, bool ordered) {
  __shared__ int slots[64];
  slots[threadIdx.x] = static_cast<int>(threadIdx.x) + 1;
  if (ordered) __syncthreads();
  out[threadIdx.x] = slots[(threadIdx.x + 1) % 64];
}

// Two block sums in a row through one shared array; with `guarded`, a barrier before each write
// (a warp that runs ahead into the second sum would otherwise overwrite what a slower warp still
// reads of the first).
__device__ int block_sum(int value, bool guarded) {
  __shared__ int partial[4];
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (guarded) __syncthreads();
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = value;
  __syncthreads();
  return partial[0] + partial[1] + partial[2] + partial[3];
}
__global__ void two_sums(int* out, bool guarded) {
  const int first = block_sum(static_cast<int>(threadIdx.x), guarded);
  const int second = block_sum(2 * static_cast<int>(threadIdx.x), guarded);
  out[threadIdx.x] = first * 100000 + second;
}

// Lanes 0-15 of warp 0 wait at the block's barrier, lanes 16-31 at the warp's: neither can be met.
__global__ void divergent_barriers(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  else __syncwarp();
  out[threadIdx.x] = 1;
}

// Reads its dynamic shared memory before anything wrote it.
__global__ void unwritten_shared(float* out) {
  extern __shared__ float scratch[];
  out[threadIdx.x] = scratch[threadIdx.x];
}

// A warp's butterfly sum of the lane numbers, and each half-warp's own, by shuffles.
__global__ void shuffles(int* whole, int* halves) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  int sum = lane;
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  whole[threadIdx.x] = sum;
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  int first = 0;
  for (int l = 0; l < 16; ++l) first += __shfl_sync(half, lane, l, 16);  // the half's lanes, summed
  halves[threadIdx.x] = first;
}

// Each half-warp shuffles among its own lanes but reads lane 16 (CUDA leaves that value undefined
// for lanes 0-15: lane 16 is not in their mask).
__global__ void shuffle_outside_mask(int* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  out[threadIdx.x] = __shfl_sync(lane < 16 ? 0x0000ffffu : 0xffff0000u, lane, 16);
}

// A block's sum through shared memory and two barriers, three times over in a loop.
__global__ void block_sums(int* out) {
  __shared__ int partial[4];
  for (int round = 0; round < 3; ++round) {
    int value = static_cast<int>(threadIdx.x) * (round + 1);
    for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = value;
    __syncthreads();
    if (threadIdx.x == 0) out[round] = partial[0] + partial[1] + partial[2] + partial[3];
    __syncthreads();
  }
}

// D = A·B for one 16 × 16 tile of bf16 operands, A row-major, B column-major, by wmma.
__global__ void tile_product(float* d, const __nv_bfloat16* a, const __nv_bfloat16* b) {
  namespace wmma = nvcuda::wmma;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

__global__ void add_one(int* x, int n) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<int>(gridDim.x * blockDim.x))
    x[i] += 1;
}

void race() {
  int* out = device_array<int>(64);
  std::vector<int> seen[2][2];  // [ordered][reverse]
  for (int ordered = 0; ordered < 2; ++ordered)
    for (int reverse = 0; reverse < 2; ++reverse) {
      cuda_emu::set_reverse_order(reverse != 0);
      cudaMemsetAsync(out, 0, 64 * sizeof(int));
      neighbours<<<1, 64>>>(out, ordered != 0);
      seen[ordered][reverse] = host_copy(out, 64);
    }
  cuda_emu::set_reverse_order(false);
  bool expected = true;
  for (int t = 0; t < 64; ++t) expected = expected && seen[1][0][t] == (t + 1) % 64 + 1 && seen[1][1][t] == seen[1][0][t];
  verdict("barrier_orders", expected, "with the barrier, the neighbours' values in either order");
  verdict("race_seen", seen[0][0] != seen[0][1], "without the barrier, both orders read the same values");
  cudaFree(out);
}

// The write-after-read hazard: caught in one of the two orders, absent with the barrier.
void overwrite() {
  int* out = device_array<int>(128);
  bool guarded_right = true, unguarded_wrong = false;
  for (int guarded = 0; guarded < 2; ++guarded)
    for (int reverse = 0; reverse < 2; ++reverse) {
      cuda_emu::set_reverse_order(reverse != 0);
      two_sums<<<1, 128>>>(out, guarded != 0);
      const std::vector<int> got = host_copy(out, 128);
      for (int v : got) {
        if (guarded) guarded_right = guarded_right && v == 8128 * 100000 + 16256;
        else unguarded_wrong = unguarded_wrong || v != 8128 * 100000 + 16256;
      }
    }
  cuda_emu::set_reverse_order(false);
  verdict("overwrite_barrier_orders", guarded_right, "with the barriers, both sums right in either order");
  verdict("overwrite_seen", unguarded_wrong, "without the first barrier, no order showed the overwrite");
  cudaFree(out);
}

void deadlock() {
  int* out = device_array<int>(64);
  divergent_barriers<<<1, 64>>>(out);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t status = cudaStreamSynchronize(nullptr);
  verdict("deadlock_caught", launched == cudaSuccess && status == cudaErrorLaunchFailure,
          std::string("synchronize said ") + cudaGetErrorString(status));
  cudaFree(out);
}

void unwritten() {
  float* out = device_array<float>(32);
  unwritten_shared<<<1, 32, 32 * sizeof(float)>>>(out);
  const std::vector<float> values = host_copy(out, 32);
  bool all_nan = true;
  for (float v : values) all_nan = all_nan && std::isnan(v);
  verdict("unwritten_shared_is_nan", all_nan, "a read before any write gave a number");
  cudaFree(out);
}

void warps() {
  int *whole = device_array<int>(64), *halves = device_array<int>(64);
  shuffles<<<1, 64>>>(whole, halves);
  const std::vector<int> w = host_copy(whole, 64), h = host_copy(halves, 64);
  bool ok = cudaStreamSynchronize(nullptr) == cudaSuccess;
  for (int t = 0; t < 64; ++t) ok = ok && w[t] == 496 && h[t] == (t % 32 < 16 ? 120 : 376);
  verdict("shuffles", ok, "a warp's sum 496, half-warps' 120 and 376");
  shuffle_outside_mask<<<1, 32>>>(whole);
  const cudaError_t outside = cudaStreamSynchronize(nullptr);
  verdict("shuffle_outside_mask_caught", outside == cudaErrorLaunchFailure,
          std::string("synchronize said ") + cudaGetErrorString(outside));
  int* sums = device_array<int>(3);
  block_sums<<<1, 128>>>(sums);
  const std::vector<int> s = host_copy(sums, 3);
  verdict("block_barriers", s[0] == 8128 && s[1] == 16256 && s[2] == 24384, "block sums of 0..127 times 1, 2, 3");
  cudaFree(whole), cudaFree(halves), cudaFree(sums);
}

void wmma_product() {
  std::vector<__nv_bfloat16> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = __float2bfloat16_rn(static_cast<float>(i % 7) - 3.0f);
    b[i] = __float2bfloat16_rn(static_cast<float>(i % 5) * 0.5f);
  }
  __nv_bfloat16 *da = device_array<__nv_bfloat16>(256), *db = device_array<__nv_bfloat16>(256);
  float* dd = device_array<float>(256);
  cudaMemcpyAsync(da, a.data(), 512, cudaMemcpyHostToDevice);
  cudaMemcpyAsync(db, b.data(), 512, cudaMemcpyHostToDevice);
  tile_product<<<1, 32>>>(dd, da, db);
  const std::vector<float> d = host_copy(dd, 256);
  bool ok = true;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      float sum = 0.0f;  // b column-major: element (k, c) at c·16 + k
      for (int k = 0; k < 16; ++k) sum += __bfloat162float(a[r * 16 + k]) * __bfloat162float(b[c * 16 + k]);
      ok = ok && d[r * 16 + c] == sum;
    }
  verdict("wmma_product", ok, "D = A·B of a 16 × 16 tile");
  cudaFree(da), cudaFree(db), cudaFree(dd);
}

void graph() {
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  int* x = device_array<int>(1000);
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  add_one<<<2, 128, 0, stream>>>(x, 1000);
  add_one<<<2, 128, 0, stream>>>(x, 1000);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  const bool captured = cudaStreamEndCapture(stream, &g) == cudaSuccess && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
  const std::vector<int> before = host_copy(x, 1000);
  for (int i = 0; captured && i < 3; ++i) cudaGraphLaunch(exec, stream);
  cudaStreamSynchronize(stream);
  const std::vector<int> after = host_copy(x, 1000);
  verdict("graph_replays", captured && before[999] == 0 && after[0] == 6 && after[999] == 6,
          "two recorded launches, replayed three times: 6");
  // A synchronization of the capturing stream is refused, and the capture is then invalid.
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  const cudaError_t synced = cudaStreamSynchronize(stream);
  cudaGraph_t broken = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &broken);
  verdict("capture_refuses_synchronize", synced != cudaSuccess && ended != cudaSuccess && broken == nullptr,
          "a capture survived a synchronization");
  cudaGraphExecDestroy(exec), cudaGraphDestroy(g), cudaFree(x), cudaStreamDestroy(stream);
}

__global__ void fill(int* x, int n, int value) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) x[i] = value;
}

// Deferred streams (TRIDENT_CUDA_EMU_STREAMS=deferred, run.sh's second run of the selftest):
// stream b copies what stream a writes. Without an event between them the copy runs first and
// reads x unwritten, as a GPU may; with one, it reads what a wrote. (Where every operation runs
// as it is enqueued, both read it written: nothing to check.)
void deferred_streams() {
  const char* mode = std::getenv("TRIDENT_CUDA_EMU_STREAMS");
  if (mode == nullptr || std::string(mode) != "deferred") return;
  cudaStream_t a = nullptr, b = nullptr;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  int *x = device_array<int>(256), *y = device_array<int>(256);
  cudaStreamSynchronize(nullptr);  // the zeros
  fill<<<1, 128, 0, a>>>(x, 256, 7);
  cudaMemcpyAsync(y, x, 256 * sizeof(int), cudaMemcpyDeviceToDevice, b);
  cudaStreamSynchronize(b);
  const std::vector<int> unordered = host_copy(y, 256);
  cudaStreamSynchronize(a);
  fill<<<1, 128, 0, a>>>(x, 256, 9);
  cudaEvent_t written = nullptr;
  cudaEventCreate(&written);
  cudaEventRecord(written, a);
  cudaStreamWaitEvent(b, written, 0);
  cudaEventDestroy(written);  // allowed before the wait has happened on the device
  cudaMemcpyAsync(y, x, 256 * sizeof(int), cudaMemcpyDeviceToDevice, b);
  cudaStreamSynchronize(b);
  const std::vector<int> ordered = host_copy(y, 256);
  verdict("deferred_missing_wait_seen", unordered[0] == 0 && unordered[255] == 0,
          "a copy on another stream with no event read " + std::to_string(unordered[0]) +
              ": the first stream's write had run before it, so a missing wait would not show");
  verdict("deferred_event_orders", ordered[0] == 9 && ordered[255] == 9,
          "after the event, the copy read " + std::to_string(ordered[0]) + ", not 9");
  cudaStreamDestroy(a), cudaStreamDestroy(b);
  cudaFree(x), cudaFree(y);
}

// TRIDENT_CUDA_EMU_STREAMS=main-late (run.sh's third run of the selftest): the legacy stream's
// work held, a non-blocking stream's run at once: a copy there that reads what the legacy stream
// writes, with no event between them, reads it unwritten; after an event, written.
void main_late_streams() {
  const char* mode = std::getenv("TRIDENT_CUDA_EMU_STREAMS");
  if (mode == nullptr || std::string(mode) != "main-late") return;
  cudaStream_t side = nullptr;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  int *x = device_array<int>(256), *y = device_array<int>(256);
  cudaStreamSynchronize(nullptr);  // the zeros
  fill<<<1, 128>>>(x, 256, 7);
  cudaMemcpyAsync(y, x, 256 * sizeof(int), cudaMemcpyDeviceToDevice, side);
  const std::vector<int> unordered = host_copy(y, 256);  // on the legacy stream: after its fill
  cudaEvent_t written = nullptr;
  cudaEventCreate(&written);
  fill<<<1, 128>>>(x, 256, 9);
  cudaEventRecord(written, nullptr);
  cudaStreamWaitEvent(side, written, 0);
  cudaMemcpyAsync(y, x, 256 * sizeof(int), cudaMemcpyDeviceToDevice, side);
  cudaStreamSynchronize(side);
  const std::vector<int> ordered = host_copy(y, 256);
  verdict("main_late_missing_wait_seen", unordered[0] == 0 && unordered[255] == 0,
          "a side stream's copy with no event read " + std::to_string(unordered[0]) + ", not the unwritten 0");
  verdict("main_late_event_orders", ordered[0] == 9 && ordered[255] == 9,
          "after the event, the side stream's copy read " + std::to_string(ordered[0]) + ", not 9");
  cudaEventDestroy(written), cudaStreamDestroy(side), cudaFree(x), cudaFree(y);
}

// An operation that finishes after the host call that reaches it (cudaEmuLaunchPolled, the
// emulated NCCL's): here, once the host opens a gate. Until then its stream's later work waits,
// the host goes on, an event after it is not ready, and another stream's wait for that event
// holds that stream, not the host; once the gate is open, a synchronization finishes all of it.
// Captured, it starts again at each launch of the graph.
int g_gate_open = 0, g_starts = 0;
void* count_start(void* data) {
  ++g_starts;
  return data;
}
int gate(void*) { return g_gate_open; }
void no_release(void*) {}

void polled_operations() {
  cudaStream_t a = nullptr, b = nullptr;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  int *x = device_array<int>(256), *y = device_array<int>(256);
  cudaStreamSynchronize(nullptr);
  cudaEvent_t after = nullptr;
  cudaEventCreate(&after);
  g_gate_open = 0, g_starts = 0;
  cudaEmuLaunchPolled(a, count_start, gate, no_release, nullptr);
  fill<<<1, 128, 0, a>>>(x, 256, 5);
  cudaEventRecord(after, a);
  cudaStreamWaitEvent(b, after, 0);
  cudaMemcpyAsync(y, x, 256 * sizeof(int), cudaMemcpyDeviceToDevice, b);
  const cudaError_t while_closed = cudaEventQuery(after);
  const std::vector<int> early = host_copy(x, 256);  // the legacy stream: not ordered with a
  g_gate_open = 1;
  cudaStreamSynchronize(b);
  const std::vector<int> late = host_copy(y, 256);
  verdict("polled_holds_its_stream", while_closed == cudaErrorNotReady && early[0] == 0 && late[0] == 5 && late[255] == 5,
          "query " + std::string(cudaGetErrorString(while_closed)) + ", x before the gate opened " +
              std::to_string(early[0]) + ", y after " + std::to_string(late[0]) + " (wanted not ready, 0, 5)");
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  g_starts = 0;
  cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal);
  cudaEmuLaunchPolled(a, count_start, gate, no_release, nullptr);
  add_one<<<1, 256, 0, a>>>(x, 256);
  const bool captured = cudaStreamEndCapture(a, &g) == cudaSuccess && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
  for (int i = 0; captured && i < 2; ++i) cudaGraphLaunch(exec, a);
  cudaStreamSynchronize(a);
  const std::vector<int> replayed = host_copy(x, 256);
  verdict("polled_in_graph", captured && g_starts == 2 && replayed[0] == 7,
          std::to_string(g_starts) + " starts, x " + std::to_string(replayed[0]) + " (wanted 2 starts, 7)");
  if (exec) cudaGraphExecDestroy(exec);
  if (g) cudaGraphDestroy(g);
  cudaEventDestroy(after), cudaStreamDestroy(a), cudaStreamDestroy(b), cudaFree(x), cudaFree(y);
}

__global__ void fill_shared(int* x, int n) {
  extern __shared__ int dynamic[];
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) dynamic[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) x[0] = dynamic[n - 1];
}
__global__ void fill_both_shared(int* x, int n) {
  __shared__ int fixed[4096];
  extern __shared__ int dynamic[];
  fixed[threadIdx.x] = 1;
  dynamic[threadIdx.x] = 2;
  __syncthreads();
  if (threadIdx.x == 0) x[0] = fixed[n - 1] + dynamic[0];
}

// More than 48 KiB of shared memory a block only where the kernel was allowed it, as on a GPU:
// 64 KiB of dynamic shared memory refused (cudaErrorInvalidValue), then taken after
// cudaFuncSetAttribute; 16 KiB of __shared__ declarations and 40 KiB of dynamic shared memory
// fail the launch.
void shared_opt_in() {
  int* x = device_array<int>(1);
  const int n = 16384;  // 64 KiB
  fill_shared<<<1, 256, n * sizeof(int)>>>(x, n);
  const cudaError_t refused = cudaGetLastError();
  cudaFuncSetAttribute(fill_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, n * sizeof(int));
  fill_shared<<<1, 256, n * sizeof(int)>>>(x, n);
  const cudaError_t taken = cudaGetLastError();
  const std::vector<int> filled = host_copy(x, 1);
  verdict("shared_opt_in", refused == cudaErrorInvalidValue && taken == cudaSuccess && filled[0] == n - 1,
          std::string("without the attribute: ") + cudaGetErrorString(refused) + ", with it: " +
              cudaGetErrorString(taken) + " and " + std::to_string(filled[0]));
  fill_both_shared<<<1, 32, 40 << 10>>>(x, 32);
  verdict("shared_static_and_dynamic_refused", cudaStreamSynchronize(nullptr) == cudaErrorLaunchFailure,
          "16 KiB of __shared__ and 40 KiB of dynamic shared memory ran without the attribute");
  cudaFree(x);
}

void bad_launch() {
  int* x = device_array<int>(1);
  add_one<<<1, 2048>>>(x, 1);
  verdict("bad_launch_refused", cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads a block were taken");
  cudaFree(x);
}

__global__ void load_vector(const float* x, float* y) {
  const float4 v = *reinterpret_cast<const float4*>(x);
  y[0] = v.x + v.w;
}

// A float4 read at an address 16 does not divide: a GPU faults ("misaligned address"); here the
// alignment sanitizer ends the process (run.sh runs this alone and wants that end).
int misaligned() {
  float *x = device_array<float>(8), *y = device_array<float>(1);
  load_vector<<<1, 1>>>(x + 1, y);
  cudaDeviceSynchronize();
  std::printf("FAIL emu_selftest_misaligned_vector: a float4 read at a misaligned address went unnoticed\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "misaligned") return misaligned();
  race();
  overwrite();
  deadlock();
  unwritten();
  warps();
  wmma_product();
  graph();
  bad_launch();
  deferred_streams();
  main_late_streams();
  polled_operations();
  shared_opt_in();
  return failures == 0 ? 0 : 1;
}
