// The kernel backend seam: which device the model's buffers live on and which kernels run on
// them, chosen at run time (kernels.device = cpu | cuda). A Backend is an abstract class for
// what has state — its device, its memory (it is the Allocator of tracked buffers), whether it
// can run here — and holds a function table of its kernels, one entry per operation of
// kernels/ops.inc, each of exactly the type of the public declaration. Why the mix: docs/DECISIONS.md
// ("Structure"); what it is: docs/ARCHITECTURE.md ("Kernel backend").
#pragma once

#include <functional>
#include <string>

#include "kernels/kernels.hpp"
#include "tensor/allocator.hpp"

namespace trident::kernels {

// One pointer per operation; null where a backend lacks it.
struct KernelTable {
  decltype(&kernels::clear) clear = nullptr;
  decltype(&kernels::copy) copy = nullptr;
  decltype(&kernels::upload) upload = nullptr;
  decltype(&kernels::download) download = nullptr;
  decltype(&kernels::stage_download) stage_download = nullptr;
  decltype(&kernels::sum) sum = nullptr;
  decltype(&kernels::sum_into) sum_into = nullptr;
  decltype(&kernels::convert) convert = nullptr;
  decltype(&kernels::store) store = nullptr;
  decltype(&kernels::round_to) round_to = nullptr;
  decltype(&kernels::narrow) narrow = nullptr;
  decltype(&kernels::linear_forward) linear_forward = nullptr;
  decltype(&kernels::linear_backward) linear_backward = nullptr;
  decltype(&kernels::bias_gradient) bias_gradient = nullptr;
  decltype(&kernels::linear_gelu_forward) linear_gelu_forward = nullptr;
  decltype(&kernels::linear_gelu_backward) linear_gelu_backward = nullptr;
  decltype(&kernels::strided_matmul) strided_matmul = nullptr;
  decltype(&kernels::batched_matmul) batched_matmul = nullptr;
  decltype(&kernels::batched_matmul_bf16) batched_matmul_bf16 = nullptr;
  decltype(&kernels::strided_matmul_bf16) strided_matmul_bf16 = nullptr;
  decltype(&kernels::prepare_linear) prepare_linear = nullptr;
  decltype(&kernels::prepare_attention) prepare_attention = nullptr;
  decltype(&kernels::layernorm_forward) layernorm_forward = nullptr;
  decltype(&kernels::layernorm_backward) layernorm_backward = nullptr;
  decltype(&kernels::gelu_forward) gelu_forward = nullptr;
  decltype(&kernels::gelu_backward) gelu_backward = nullptr;
  decltype(&kernels::residual_forward) residual_forward = nullptr;
  decltype(&kernels::bias_residual_forward) bias_residual_forward = nullptr;
  decltype(&kernels::add_inplace) add_inplace = nullptr;
  decltype(&kernels::rmsnorm_forward) rmsnorm_forward = nullptr;
  decltype(&kernels::rmsnorm_backward) rmsnorm_backward = nullptr;
  decltype(&kernels::rope) rope = nullptr;
  decltype(&kernels::swiglu_forward) swiglu_forward = nullptr;
  decltype(&kernels::swiglu_backward) swiglu_backward = nullptr;
  decltype(&kernels::expand_kv) expand_kv = nullptr;
  decltype(&kernels::reduce_kv) reduce_kv = nullptr;
  decltype(&kernels::attention_forward) attention_forward = nullptr;
  decltype(&kernels::attention_backward) attention_backward = nullptr;
  decltype(&kernels::attention_forward_bf16) attention_forward_bf16 = nullptr;
  decltype(&kernels::attention_backward_bf16) attention_backward_bf16 = nullptr;
  decltype(&kernels::attention_decode) attention_decode = nullptr;
  decltype(&kernels::flash_attention_forward) flash_attention_forward = nullptr;
  decltype(&kernels::flash_attention_backward) flash_attention_backward = nullptr;
  decltype(&kernels::flash_attention_block_forward) flash_attention_block_forward = nullptr;
  decltype(&kernels::flash_attention_block_backward) flash_attention_block_backward = nullptr;
  decltype(&kernels::copy_columns) copy_columns = nullptr;
  decltype(&kernels::embedding_forward) embedding_forward = nullptr;
  decltype(&kernels::embedding_backward) embedding_backward = nullptr;
  decltype(&kernels::positions_forward) positions_forward = nullptr;
  decltype(&kernels::positions_backward) positions_backward = nullptr;
  decltype(&kernels::crossentropy_row_max) crossentropy_row_max = nullptr;
  decltype(&kernels::crossentropy_row_sums) crossentropy_row_sums = nullptr;
  decltype(&kernels::crossentropy_losses) crossentropy_losses = nullptr;
  decltype(&kernels::crossentropy_backward) crossentropy_backward = nullptr;
  decltype(&kernels::crossentropy_forward_backward) crossentropy_forward_backward = nullptr;
  decltype(&kernels::adamw_update) adamw_update = nullptr;
  decltype(&kernels::sums_of_squares) sums_of_squares = nullptr;
  decltype(&kernels::sums_of_squares_into) sums_of_squares_into = nullptr;
  decltype(&kernels::mean_losses_into) mean_losses_into = nullptr;
  decltype(&kernels::step_control) step_control = nullptr;

  // Entries set, of all (a backend runs a job only with every one).
  int present() const;
  static int total();
};

class Backend : public Allocator {
 public:
  virtual const char* name() const = 0;  // "cpu", "cuda": the kernels.device value
  virtual const KernelTable& kernels() const = 0;
  // Why this backend cannot run a job in this process ("" when it can): no device visible, or
  // kernels missing from its table.
  virtual std::string unavailable_reason() const = 0;
  // Why its kernels cannot run on the device this process took ("" when they can): CUDA, a GPU
  // this binary has no kernel image for (kernels/cuda/kernel_images.hpp), or one that takes no
  // context. Asked once the rank's device is current: asking makes a context on it.
  virtual std::string device_unfit_reason() const { return ""; }
  // This process's device's memory, what the memory model checks a job against: its size, and
  // what is free of it now (neither this process's nor another's: every process's allocations
  // and CUDA contexts taken off). Both 0 where the model's memory is the host's (the CPU).
  struct DeviceMemory {
    double total = 0, free = 0;  // bytes
  };
  virtual DeviceMemory device_memory() const { return {}; }
  // The physical device, where its index does not tell it (CUDA: its UUID — a process that sees
  // one GPU calls it device 0 whichever it is, and a MIG slice is a device of its own); "" where
  // the index does (the CPU, the guard's one emulated device).
  virtual std::string device_identity() const { return ""; }
  // What the planner's profile of a device gives (plan/hardware.hpp), for plan --calibrate on a
  // GPU: its name, its compute units (SMs), the shared memory a block may opt in to, and the bytes
  // the stream-ordered pool holds now (its scratch in use and kept for reuse: the kernels', not
  // the runtime's). Empty where the device is no GPU.
  struct DeviceFacts {
    std::string name;  // "NVIDIA H200"
    int compute_units = 0;
    double block_shared_memory = 0, pool_reserved = 0;  // bytes
  };
  virtual DeviceFacts device_facts() const { return {}; }
  // The most bytes of the kernels' stream-ordered scratch alive at once in this process so far
  // (CUDA: cudaMallocAsync's from the device's default pool — cuDNN's workspace and operand
  // copies, an unfused GEMM's f32 sums, the column sums' chunks), which are not tracked buffers
  // and which the memory model does not count; 0 where the kernels have none (the CPU's scratch
  // is tracked: runs_cpu_kernels).
  virtual double stream_scratch_peak() const { return 0; }
  // The operations so far whose result the host read out of device memory — download, sum,
  // sums_of_squares: each a device-to-host copy the host waits for — where the backend counts
  // them (the guard: issue 30's "no host round trip" proof); −1 where it does not.
  virtual int64_t host_reads() const { return -1; }
  // Whether this backend's kernels are the CPU's (the CPU backend's and the guard's): then their
  // own workspaces (kernels/cpu/workspace.hpp) — 16-bit GEMM operands widened to f32
  // (kernels::widens_low16), a 16-bit GEMM output's f32 sums before they are rounded
  // (linear_forward, linear_gelu_forward and linear_gelu_backward), the norms' f32 values — are
  // tracked buffers, which the memory model counts. A device's kernels write 16-bit outputs
  // themselves (CUDA: cuBLASLt's epilogues, the norms' own loops).
  virtual bool runs_cpu_kernels() const { return true; }

  // Streams of the device (seed §3.2: communication on a stream of its own, ordered against the
  // compute stream by events). On the CPU every call runs to completion in the calling thread,
  // in program order, so a stream is the host's and the ordering below holds already.
  // A new stream (release it with destroy_stream).
  virtual Stream create_stream() { return Stream{device(), nullptr}; }
  virtual void destroy_stream(Stream) {}
  // Work enqueued on `waiting` from now on starts only after the work enqueued on `done` so far.
  virtual void stream_wait(Stream /*waiting*/, Stream /*done*/) {}

  // Time on a stream's own clock (seed §3.2: the exposed communication measured with events).
  // mark(stream) records the point at which `stream` has done the work enqueued on it so far;
  // seconds_between(from, to) waits until `to` is reached and returns the seconds from `from` to
  // it, releasing both marks. On the host's streams (the CPU, the guard) a mark is the host clock
  // at the call, when that work is done already; on CUDA it is an event (cudaEventElapsedTime).
  struct Mark {
    void* event = nullptr;  // the device's record, or null on the host
    double host_seconds = 0;
  };
  virtual Mark mark(Stream stream);
  virtual double seconds_between(Mark from, Mark to);

  // Graphs (cuda.graphs; seed §3.2: a micro-batch's forward and backward launched as one
  // graph, not hundreds of kernels). capture_graph records the work `enqueue` puts on `stream`
  // without running it; launch_graph runs that record on `stream`, as often as wanted, with the
  // arguments it was recorded with (the same buffers, the same scalars). Only device work may be
  // recorded: an upload, a download or a result read on the host inside `enqueue` is an error
  // (CUDA: the capture fails; the guard: reported, exit 70). Handles are released with
  // destroy_graph. graphs_unavailable(): "" where this backend records graphs, else why not.
  virtual std::string graphs_unavailable() const { return "the CPU backend runs each kernel as it is called"; }
  virtual void* capture_graph(Stream stream, const std::function<void()>& enqueue);
  virtual void launch_graph(void* graph, Stream stream);
  virtual void destroy_graph(void* graph);
  // A stream for the model's kernels that a capture can record (CUDA cannot capture its legacy
  // default stream), implicitly ordered with the legacy one as that stream's own work would be.
  virtual Stream create_capturable_stream() { return create_stream(); }
};

Backend& cpu_backend();
// The backend of kernels.device = `name`, or null where this binary has none (cuda without
// CUDA compiled in).
Backend* find_backend(const std::string& name);
// Whether the backend of `name` can run here: "" when it can, else why not (the deck error's
// reason).
std::string backend_unavailable(const std::string& name);

// ctx's backend: the one it names, or the CPU's.
Backend& backend_of(const Context& ctx);

}  // namespace trident::kernels
