// The CUDA backend, namespace kernels::cuda: device, pinned and host memory, and its kernel
// table — every operation of kernels/ops.inc (kernels/cuda/*.cu). It can run where CUDA sees a
// GPU and cuBLASLt can be opened; elsewhere kernels.device = cuda is a deck error that says which.
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/cuda_libraries.hpp"
#include "kernels/cuda/kernel_images.hpp"

namespace trident::kernels::cuda {

// nvcc's list names each architecture as __CUDA_ARCH__ does (900 for sm_90).
KernelImages compiled_kernel_images() {
  KernelImages images{{}, TRIDENT_CUDA_PTX_ARCH};
  for (const int arch : {__CUDA_ARCH_LIST__}) images.machine_code.push_back(arch / 10);
  return images;
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// cudaGetLastError, not cudaPeekAtLastError: peeking never clears the error, so one failed launch
// would be blamed on every kernel launched after it.
void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("launching the CUDA kernel ") + kernel + ": " + cudaGetErrorString(status));
}

namespace {

// An empty kernel, compiled as every other (the Makefile's CUDA_ARCHS): whether the current GPU
// loads it is whether it loads them.
__global__ void kernel_image_probe() {}

KernelTable make_table() {
  KernelTable t;
  t.clear = &cuda::clear;
  t.copy = &cuda::copy;
  t.upload = &cuda::upload;
  t.download = &cuda::download;
  t.stage_download = &cuda::download;  // the same copy; only the guard tells them apart
  t.sum = &cuda::sum;
  t.sum_into = &cuda::sum_into;
  t.convert = &cuda::convert;
  t.store = &cuda::store;
  t.round_to = &cuda::round_to;
  t.narrow = &cuda::narrow;
  t.linear_forward = &cuda::linear_forward;
  t.linear_backward = &cuda::linear_backward;
  t.bias_gradient = &cuda::bias_gradient;
  t.linear_gelu_forward = &cuda::linear_gelu_forward;
  t.linear_gelu_backward = &cuda::linear_gelu_backward;
  t.strided_matmul = &cuda::strided_matmul;
  t.batched_matmul = &cuda::batched_matmul;
  t.batched_matmul_bf16 = &cuda::batched_matmul_bf16;
  t.strided_matmul_bf16 = &cuda::strided_matmul_bf16;
  t.prepare_linear = &cuda::prepare_linear;
  t.prepare_attention = &cuda::prepare_attention;
  t.layernorm_forward = &cuda::layernorm_forward;
  t.layernorm_backward = &cuda::layernorm_backward;
  t.gelu_forward = &cuda::gelu_forward;
  t.gelu_backward = &cuda::gelu_backward;
  t.residual_forward = &cuda::residual_forward;
  t.bias_residual_forward = &cuda::bias_residual_forward;
  t.add_inplace = &cuda::add_inplace;
  t.attention_forward = &cuda::attention_forward;
  t.attention_backward = &cuda::attention_backward;
  t.attention_forward_bf16 = &cuda::attention_forward_bf16;
  t.attention_backward_bf16 = &cuda::attention_backward_bf16;
  t.attention_decode = &cuda::attention_decode;
  t.flash_attention_forward = &cuda::flash_attention_forward;
  t.flash_attention_backward = &cuda::flash_attention_backward;
  t.flash_attention_block_forward = &cuda::flash_attention_block_forward;
  t.flash_attention_block_backward = &cuda::flash_attention_block_backward;
  t.copy_columns = &cuda::copy_columns;
  t.rmsnorm_forward = &cuda::rmsnorm_forward;
  t.rmsnorm_backward = &cuda::rmsnorm_backward;
  t.rope = &cuda::rope;
  t.swiglu_forward = &cuda::swiglu_forward;
  t.swiglu_backward = &cuda::swiglu_backward;
  t.expand_kv = &cuda::expand_kv;
  t.reduce_kv = &cuda::reduce_kv;
  t.embedding_forward = &cuda::embedding_forward;
  t.embedding_backward = &cuda::embedding_backward;
  t.positions_forward = &cuda::positions_forward;
  t.positions_backward = &cuda::positions_backward;
  t.crossentropy_row_max = &cuda::crossentropy_row_max;
  t.crossentropy_row_sums = &cuda::crossentropy_row_sums;
  t.crossentropy_losses = &cuda::crossentropy_losses;
  t.crossentropy_backward = &cuda::crossentropy_backward;
  t.crossentropy_forward_backward = &cuda::crossentropy_forward_backward;
  t.adamw_update = &cuda::adamw_update;
  t.sums_of_squares = &cuda::sums_of_squares;
  t.sums_of_squares_into = &cuda::sums_of_squares_into;
  t.mean_losses_into = &cuda::mean_losses_into;
  t.step_control = &cuda::step_control;
  return t;
}

class CudaBackend final : public Backend {
 public:
  // The GPU the process made current before its first buffer (job start-up: the rank's position on
  // its host modulo the GPUs it sees), remembered at the first call: threads other than the main
  // one (the gradient reducer's) start on device 0 whatever the rank's GPU.
  Device device() const override {
    std::call_once(index_known_, [this] {
      if (cudaGetDevice(&index_) != cudaSuccess) index_ = 0;
      keep_pool_memory(index_);
    });
    return Device{DeviceKind::cuda, index_};
  }
  // A refused allocation is the caller's to handle (nullptr; the GEMM-peak probe then tries a
  // smaller size): the error it left as the thread's last is cleared (refused), or the next
  // kernel's launch check would report it as its own.
  void* allocate(size_t bytes, MemoryKind kind) override {
    void* pointer = nullptr;
    if (kind == MemoryKind::host) return host_allocator().allocate(bytes, kind);
    if (kind == MemoryKind::pinned_host) {
      if (cudaMallocHost(&pointer, bytes) != cudaSuccess) return refused();
      std::memset(pointer, 0, bytes);
      return pointer;
    }
    if (cudaMalloc(&pointer, bytes) != cudaSuccess) return refused();  // 256-byte aligned
    // Zeroed on the legacy stream and waited for: the buffer's first user may be a non-blocking
    // stream (the communication stream), which nothing orders after the legacy stream's memset.
    // Buffers are allocated at set-up and on a re-split, never within a step.
    if (cudaMemsetAsync(pointer, 0, bytes, nullptr) != cudaSuccess || cudaStreamSynchronize(nullptr) != cudaSuccess) {
      cudaFree(pointer);
      return refused();
    }
    return pointer;
  }
  void release(void* pointer, size_t bytes, MemoryKind kind) override {
    if (kind == MemoryKind::host) host_allocator().release(pointer, bytes, kind);
    else if (kind == MemoryKind::pinned_host) cudaFreeHost(pointer);
    else cudaFree(pointer);
  }
  const char* name() const override { return "cuda"; }
  // Non-blocking: no implicit ordering with the legacy default stream the model's kernels run on
  // (Context's null handle); stream_wait orders the two where they must be.
  Stream create_stream() override {
    cudaStream_t stream = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cudaStreamCreateWithFlags failed");
    return Stream{device(), stream};
  }
  void destroy_stream(Stream stream) override { cudaStreamDestroy(static_cast<cudaStream_t>(stream.handle)); }
  // An event recorded on `done` and waited for by `waiting`; destroying it at once is allowed
  // (CUDA releases it when the wait has happened).
  void stream_wait(Stream waiting, Stream done) override {
    cudaEvent_t event = nullptr;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord(event, static_cast<cudaStream_t>(done.handle)) != cudaSuccess ||
        cudaStreamWaitEvent(static_cast<cudaStream_t>(waiting.handle), event, 0) != cudaSuccess)
      throw std::runtime_error("ordering two CUDA streams by an event failed");
    cudaEventDestroy(event);
  }
  // A timing event recorded on the stream; the elapsed time between two, once the second is
  // reached, on the GPU's clock (about 0.5 µs resolution).
  Mark mark(Stream stream) override {
    cudaEvent_t event = nullptr;
    check(cudaEventCreate(&event), "cudaEventCreate");
    check(cudaEventRecord(event, static_cast<cudaStream_t>(stream.handle)), "cudaEventRecord");
    return Mark{event, 0.0};
  }
  double seconds_between(Mark from, Mark to) override {
    const auto start = static_cast<cudaEvent_t>(from.event), end = static_cast<cudaEvent_t>(to.event);
    float milliseconds = 0.0f;
    const cudaError_t reached = cudaEventSynchronize(end);
    const cudaError_t measured = reached == cudaSuccess ? cudaEventElapsedTime(&milliseconds, start, end) : reached;
    cudaEventDestroy(start);
    cudaEventDestroy(end);
    check(measured, "cudaEventElapsedTime");
    return 1e-3 * milliseconds;
  }
  // A blocking stream (cudaStreamCreate): ordered with the legacy default stream as that
  // stream's own work is, so that work other code enqueues there still follows the model's.
  Stream create_capturable_stream() override {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "cudaStreamCreate (the model's stream, for cuda.graphs)");
    return Stream{device(), stream};
  }
  std::string graphs_unavailable() const override { return ""; }
  bool runs_cpu_kernels() const override { return false; }
  // Stream capture in thread-local mode: other threads (the gradient reducer's) keep launching
  // while this one captures. An operation that cannot be captured (a synchronous copy, a host
  // read of a result) fails the capture here, naming the error.
  void* capture_graph(Stream stream, const std::function<void()>& enqueue) override {
    const auto captured = static_cast<cudaStream_t>(stream.handle);
    if (captured == nullptr)
      throw std::logic_error("a CUDA Graph cannot capture the legacy default stream: the model's stream comes from "
                             "create_capturable_stream()");
    check(cudaStreamBeginCapture(captured, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      enqueue();
    } catch (...) {
      cudaStreamEndCapture(captured, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    check(cudaStreamEndCapture(captured, &graph), "cudaStreamEndCapture (the captured forward or backward did "
                                                  "something a graph cannot hold)");
    cudaGraphExec_t executable = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&executable, graph, 0);
    cudaGraphDestroy(graph);
    check(instantiated, "cudaGraphInstantiate");
    return executable;
  }
  void launch_graph(void* graph, Stream stream) override {
    check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream.handle)),
          "cudaGraphLaunch");
  }
  void destroy_graph(void* graph) override { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)); }
  DeviceMemory device_memory() const override {
    size_t free = 0, total = 0;
    device();  // the index remembered on the GPU made current at start-up
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) return {static_cast<double>(total), static_cast<double>(free)};
    cudaGetLastError();  // 0: no device figure (the check then uses none), and no error left behind
    return {};
  }
  std::string device_identity() const override {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device().index) != cudaSuccess) {
      cudaGetLastError();
      return "";
    }
    char text[48];  // as nvidia-smi writes it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
    const auto* b = reinterpret_cast<const unsigned char*>(properties.uuid.bytes);
    std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return text;
  }
  DeviceFacts device_facts() const override {
    DeviceFacts facts;
    cudaDeviceProp properties{};
    int units = 0;
    cudaMemPool_t pool = nullptr;
    unsigned long long reserved = 0;  // (cuuint64_t)
    int shared = 0;
    // A figure it could not read stays 0, and its error is not left behind (cudaGetLastError after
    // a failed call only: one pending from earlier work is not this query's to clear).
    const int index = device().index;
    if (cudaGetDeviceProperties(&properties, index) == cudaSuccess) facts.name = properties.name;
    else cudaGetLastError();
    if (cudaDeviceGetAttribute(&units, cudaDevAttrMultiProcessorCount, index) == cudaSuccess) facts.compute_units = units;
    else cudaGetLastError();
    if (cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, index) == cudaSuccess)
      facts.block_shared_memory = static_cast<double>(shared);
    else cudaGetLastError();
    if (cudaDeviceGetDefaultMemPool(&pool, index) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess)
      facts.pool_reserved = static_cast<double>(reserved);
    else cudaGetLastError();
    return facts;
  }
  double stream_scratch_peak() const override {
    cudaMemPool_t pool = nullptr;
    unsigned long long high = 0;  // (cuuint64_t) the pool's high-water mark of memory in use, never reset
    if (cudaDeviceGetDefaultMemPool(&pool, device().index) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) != cudaSuccess) {
      cudaGetLastError();  // no pool: no scratch of it, and no error left behind
      return 0.0;
    }
    return static_cast<double>(high);
  }
  const KernelTable& kernels() const override { return table_; }
  std::string unavailable_reason() const override {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0)
      return std::string("this machine has no GPU visible to CUDA (cudaGetDeviceCount: ") +
             (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") + ")";
    if (const std::string& why = cublaslt_library().problem(); !why.empty())
      return "cuBLASLt, which every GEMM of the backend runs on, cannot be loaded (" + why + ")";
    if (table_.present() < KernelTable::total())  // a programming error: make_table lists every one
      return "this binary's CUDA backend lacks kernels (" + std::to_string(table_.present()) + " of " +
             std::to_string(KernelTable::total()) + " operations)";
    return "";
  }
  std::string device_unfit_reason() const override {
    const int index = device().index;
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, kernel_image_probe) == cudaSuccess) return "";
    const cudaError_t status = cudaGetLastError();
    const std::string gpu = "GPU " + std::to_string(index);
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) {
      cudaGetLastError();
      return gpu + " cannot load a CUDA kernel (" + cudaGetErrorString(status) + ")";
    }
    const std::string why = kernel_fit_problem(compiled_kernel_images(), 10 * properties.major + properties.minor,
                                               gpu + ", " + properties.name);
    // An image that fits, and still no kernel: the driver's compile of the PTX failed, or the module
    // could not be loaded (the GPU's memory full).
    return !why.empty() ? why : gpu + ", " + properties.name + ", cannot load a CUDA kernel (" +
                                    cudaGetErrorString(status) + ")";
  }

 private:
  // The device's default memory pool, which the stream-ordered scratch comes from (cudaMallocAsync:
  // cuDNN's workspace and operand copies, a GEMM's f32 sums, the column sums' chunks), keeps what
  // it has mapped: at its default release threshold (0) it returns the memory to the driver at
  // every synchronization — each step's download — and maps it again in the next step. What it
  // keeps is the step's largest scratch at once, which the step needs anyway.
  static void keep_pool_memory(int index) {
    cudaMemPool_t pool = nullptr;
    uint64_t everything = UINT64_MAX;
    if (cudaDeviceGetDefaultMemPool(&pool, index) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &everything) != cudaSuccess)
      cudaGetLastError();  // no pool to keep (a device without stream-ordered allocation): as before
  }
  static void* refused() {
    cudaGetLastError();
    return nullptr;
  }
  KernelTable table_ = make_table();
  mutable std::once_flag index_known_;
  mutable int index_ = 0;
};

}  // namespace

Backend& backend() {
  // Never destroyed, so that buffers of static storage duration, released at exit in whatever
  // order, can still reach it.
  static CudaBackend* const instance = new CudaBackend();
  return *instance;
}

}  // namespace trident::kernels::cuda
