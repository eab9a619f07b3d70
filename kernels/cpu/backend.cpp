// The CPU backend: host memory for every MemoryKind, and the kernels of namespace kernels::cpu
// (oneDNN + OpenMP) as its table. Always available.
#include "kernels/backend.hpp"
#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {
namespace {

KernelTable make_table() {
  KernelTable t;
  t.clear = &cpu::clear;
  t.copy = &cpu::copy;
  t.upload = &cpu::upload;
  t.download = &cpu::download;
  t.stage_download = &cpu::download;  // the same copy; only the guard tells them apart
  t.sum = &cpu::sum;
  t.sum_into = &cpu::sum_into;
  t.convert = &cpu::convert;
  t.store = &cpu::store;
  t.round_to = &cpu::round_to;
  t.narrow = &cpu::narrow;
  t.linear_forward = &cpu::linear_forward;
  t.linear_backward = &cpu::linear_backward;
  t.bias_gradient = &cpu::bias_gradient;
  t.linear_gelu_forward = &cpu::linear_gelu_forward;
  t.linear_gelu_backward = &cpu::linear_gelu_backward;
  t.strided_matmul = &cpu::strided_matmul;
  t.batched_matmul = &cpu::batched_matmul;
  t.batched_matmul_bf16 = &cpu::batched_matmul_bf16;
  t.strided_matmul_bf16 = &cpu::strided_matmul_bf16;
  t.prepare_linear = &cpu::prepare_linear;
  t.prepare_attention = &cpu::prepare_attention;
  t.layernorm_forward = &cpu::layernorm_forward;
  t.layernorm_backward = &cpu::layernorm_backward;
  t.gelu_forward = &cpu::gelu_forward;
  t.gelu_backward = &cpu::gelu_backward;
  t.residual_forward = &cpu::residual_forward;
  t.bias_residual_forward = &cpu::bias_residual_forward;
  t.add_inplace = &cpu::add_inplace;
  t.attention_forward = &cpu::attention_forward;
  t.attention_backward = &cpu::attention_backward;
  t.attention_forward_bf16 = &cpu::attention_forward_bf16;
  t.attention_backward_bf16 = &cpu::attention_backward_bf16;
  t.attention_decode = &cpu::attention_decode;
  t.flash_attention_forward = &cpu::flash_attention_forward;
  t.flash_attention_backward = &cpu::flash_attention_backward;
  t.flash_attention_block_forward = &cpu::flash_attention_block_forward;
  t.flash_attention_block_backward = &cpu::flash_attention_block_backward;
  t.copy_columns = &cpu::copy_columns;
  t.rmsnorm_forward = &cpu::rmsnorm_forward;
  t.rmsnorm_backward = &cpu::rmsnorm_backward;
  t.rope = &cpu::rope;
  t.swiglu_forward = &cpu::swiglu_forward;
  t.swiglu_backward = &cpu::swiglu_backward;
  t.expand_kv = &cpu::expand_kv;
  t.reduce_kv = &cpu::reduce_kv;
  t.embedding_forward = &cpu::embedding_forward;
  t.embedding_backward = &cpu::embedding_backward;
  t.positions_forward = &cpu::positions_forward;
  t.positions_backward = &cpu::positions_backward;
  t.crossentropy_row_max = &cpu::crossentropy_row_max;
  t.crossentropy_row_sums = &cpu::crossentropy_row_sums;
  t.crossentropy_losses = &cpu::crossentropy_losses;
  t.crossentropy_backward = &cpu::crossentropy_backward;
  t.crossentropy_forward_backward = &cpu::crossentropy_forward_backward;
  t.adamw_update = &cpu::adamw_update;
  t.sums_of_squares = &cpu::sums_of_squares;
  t.sums_of_squares_into = &cpu::sums_of_squares_into;
  t.mean_losses_into = &cpu::mean_losses_into;
  t.step_control = &cpu::step_control;
  return t;
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device{}; }
  // Pinned and device memory are host memory here: the CPU has no other.
  void* allocate(size_t bytes, MemoryKind kind) override { return host_allocator().allocate(bytes, kind); }
  void release(void* pointer, size_t bytes, MemoryKind kind) override {
    host_allocator().release(pointer, bytes, kind);
  }
  const char* name() const override { return "cpu"; }
  const KernelTable& kernels() const override { return table_; }
  std::string unavailable_reason() const override { return ""; }

 private:
  KernelTable table_ = make_table();
};

}  // namespace

Backend& backend() {
  // Never destroyed, so that buffers of static storage duration (the CPU's widening workspace),
  // released at exit in whatever order, can still reach it.
  static CpuBackend* const instance = new CpuBackend();
  return *instance;
}

}  // namespace trident::kernels::cpu
