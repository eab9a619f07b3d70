// Choosing the kernel backend: the CPU's always, the CUDA one where it is compiled in and can
// run; a context naming none runs on the CPU's.
#include "kernels/backend.hpp"

#include <stdexcept>

#include "core/clock.hpp"

namespace trident::kernels {
namespace cpu {
Backend& backend();  // kernels/cpu/backend.cpp
}
namespace guard {
Backend& backend();  // kernels/guard/backend.cpp
}
#if TRIDENT_CUDA
namespace cuda {
Backend& backend();  // kernels/cuda/backend.cu
}
#endif

namespace {

template <class... F>
int count_set(F... entries) {
  return ((entries != nullptr ? 1 : 0) + ...);
}

}  // namespace

int KernelTable::present() const {
  return count_set(clear, copy, upload, download, stage_download, sum, sum_into, convert, store, round_to, narrow, linear_forward,
                   linear_backward, bias_gradient, linear_gelu_forward, linear_gelu_backward, strided_matmul, batched_matmul, batched_matmul_bf16, strided_matmul_bf16,
                   prepare_linear, prepare_attention, layernorm_forward, layernorm_backward, gelu_forward,
                   gelu_backward, residual_forward, bias_residual_forward, add_inplace, rmsnorm_forward,
                   rmsnorm_backward, rope, swiglu_forward, swiglu_backward, expand_kv, reduce_kv, attention_forward,
                   attention_backward, attention_forward_bf16, attention_backward_bf16, attention_decode,
                   flash_attention_forward, flash_attention_backward, flash_attention_block_forward,
                   flash_attention_block_backward, copy_columns, embedding_forward,
                   embedding_backward, positions_forward, positions_backward, crossentropy_row_max,
                   crossentropy_row_sums, crossentropy_losses, crossentropy_backward, crossentropy_forward_backward, adamw_update,
                   sums_of_squares, sums_of_squares_into, mean_losses_into, step_control);
}

// Every entry is one function pointer, so the struct's size counts them (the unit tests hold
// present() to it for the CPU, which has every entry).
int KernelTable::total() { return static_cast<int>(sizeof(KernelTable) / sizeof(void (*)())); }

Backend::Mark Backend::mark(Stream) { return Mark{nullptr, steady_seconds()}; }
double Backend::seconds_between(Mark from, Mark to) { return to.host_seconds - from.host_seconds; }

void* Backend::capture_graph(Stream, const std::function<void()>&) {
  throw std::logic_error(std::string("the ") + name() + " kernel backend records no graphs: " + graphs_unavailable());
}
void Backend::launch_graph(void*, Stream) { capture_graph(Stream{}, {}); }
void Backend::destroy_graph(void*) {}

Backend& cpu_backend() { return cpu::backend(); }

Backend* find_backend(const std::string& name) {
  if (name == "cpu") return &cpu::backend();
  if (name == "guard") return &guard::backend();
#if TRIDENT_CUDA
  if (name == "cuda") return &cuda::backend();
#endif
  return nullptr;
}

std::string backend_unavailable(const std::string& name) {
  Backend* backend = find_backend(name);
  if (backend == nullptr && name == "cuda")
    return "this binary was built without CUDA (build it where nvcc is on PATH, or make CUDA=1)";
  if (backend == nullptr) return "there is no kernel backend '" + name + "' (there are cpu, cuda and guard)";
  return backend->unavailable_reason();
}

Backend& backend_of(const Context& ctx) { return ctx.backend ? *ctx.backend : cpu::backend(); }

}  // namespace trident::kernels
