// Which path the 16-bit GEMMs take on this CPU: oneDNN is asked (by creating a small matmul on
// the 16-bit type), not /proc/cpuinfo, since what counts is what the library will run —
// including under DNNL_MAX_CPU_ISA.
#include <dnnl.hpp>

#include <map>
#include <mutex>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/kernels.hpp"

namespace trident::kernels {
namespace {

struct Probe {
  bool available = false;
  std::string implementation;  // oneDNN's name for the kernel, e.g. "brg:avx512_core_bf16"
};

Probe probe(Precision precision) {
  using dnnl::memory;
  const memory::data_type type = precision == Precision::bf16 ? memory::data_type::bf16 : memory::data_type::f16;
  const memory::dims shape{16, 16};
  Probe result;
  try {
    const memory::desc a(shape, type, memory::format_tag::ab), b(shape, type, memory::format_tag::ab);
    const memory::desc c(shape, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), cpu::cpu_engine());
    result.available = true;
    result.implementation = pd.impl_info_str();
  } catch (const dnnl::error&) {
    // No matmul on this type for this CPU: the widened path.
  }
  return result;
}

const Probe& cached_probe(Precision precision) {
  static std::map<Precision, Probe> probes;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = probes.find(precision);
  if (found == probes.end()) found = probes.emplace(precision, probe(precision)).first;
  return found->second;
}

// oneDNN's own name of the 16-bit type.
const char* onednn_type(Precision precision) { return precision == Precision::bf16 ? "bf16" : "f16"; }

}  // namespace

std::string cpu_isa() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
#if defined(__aarch64__)
  // oneDNN's public enum names x86's ISAs only; on AArch64 the same call returns its own
  // (src/cpu/aarch64/cpu_isa_traits.hpp: one bit each for Advanced SIMD and SVE at 128, 256,
  // 384 and 512 bits, each set with those below it), which read as x86 names would be nonsense.
  switch (static_cast<unsigned>(isa)) {
    case 0x1: return "asimd";
    case 0x3: return "sve_128";
    case 0x7: return "sve_256";
    case 0xf: return "sve_384";
    case 0x1f: return "sve_512";
    default: return "unknown (oneDNN AArch64 cpu_isa " + std::to_string(static_cast<unsigned>(isa)) + ")";
  }
#else
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "unknown (oneDNN cpu_isa " + std::to_string(static_cast<int>(isa)) + ")";
  }
#endif
}

bool native_low16_gemm_available(Precision precision) {
  return precision == Precision::fp32 || cached_probe(precision).available;
}

int64_t gemm_primitives_created() { return cpu::primitives_created(); }

bool widens_low16(const Context& ctx, Precision precision) {
  // Portable GEMMs widen 16-bit operands as they read them, into no workspace; a device's
  // kernels (CUDA's) multiply them on the device, whatever this host's CPU offers.
  if (precision == Precision::fp32 || ctx.arithmetic == Arithmetic::portable) return false;
  if (!backend_of(ctx).runs_cpu_kernels()) return false;
  switch (ctx.low16_gemm) {
    case Low16Gemm::widened: return true;
    case Low16Gemm::native: return false;
    default: return !native_low16_gemm_available(precision);
  }
}

std::string gemm_path_summary(const Context& ctx, Precision precision) {
  const std::string head = std::string(precision_name(precision)) + " GEMM: ";
  const Backend& backend = backend_of(ctx);  // a device's kernels: not this CPU's path
  if (!backend.runs_cpu_kernels()) return head + "on the device (kernels.device = " + backend.name() + ")";
  if (ctx.arithmetic == Arithmetic::portable)
    return head + "portable (kernels.arithmetic = portable: our fixed-order kernels, no oneDNN, on " + cpu_isa() + ")";
  if (precision == Precision::fp32) return head + "f32 on " + cpu_isa();
  const Probe& p = cached_probe(precision);
  if (!widens_low16(ctx, precision))
    return head + "native " + cpu_isa() + " (oneDNN " + (p.available ? p.implementation : "refuses it") + ")";
  if (!p.available) return head + "widened to f32 (no " + onednn_type(precision) + " matmul on " + cpu_isa() + ")";
  return head + "widened to f32 (kernels.low16_gemm = widened; native " + p.implementation + " available on " +
         cpu_isa() + ")";
}

}  // namespace trident::kernels
