// Every operation of the CUDA backend against the CPU backend on the same random inputs: one
// "PASS cuda_NAME" / "FAIL cuda_NAME" line per operation (tests/e2e/lib.sh's format), with the
// worst error as a fraction of its tolerance. Where CUDA sees no GPU, one "SKIP cuda_NAME
// (why)" line per operation and exit 0: `make test` on a machine without a GPU reports them as
// skipped. The GPU side runs on a non-blocking stream of its own, so a kernel that ignored the
// Context's stream would race with the copies and fail here.
//
// Tolerances, per kind of arithmetic (|gpu − cpu| ≤ rtol·|cpu| + atol·rms(cpu) per element):
//   exact  the same operations in the same order (conversions, copies, adds, embedding sums in
//          position order, the loss sum): bit for bit.
//   f32    the same formulas with another reduction order or libm (block reductions, expf,
//          tanh/exp forms, FMA contraction): rtol 1e-5, atol 1e-5.
//   gemm   f32 GEMMs without TF32, and bf16 GEMMs (the same bf16 operands, products exact in
//          f32, summed in f32 in another order): rtol 1e-4, atol 1e-4.
//   bf16   results that pass through a rounding to bf16 of values the two backends computed
//          in f32 up to their last bits (the attention probabilities and dS): one bf16 unit
//          (2^-8 relative) where a value sits at a rounding tie; rtol 1e-2, atol 1e-2.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/cuda.hpp"
#include "tensor/buffer.hpp"

using namespace trident;
using kernels::bf16;
using kernels::Context;
using kernels::low16;
using kernels::Precision;

namespace {

// Llama 3.1's scaled rotary frequencies: every region of the scaling reached by a head of 16.
const kernels::RopeFrequencies kRopeScaled{500000.0f, 8.0f, 1.0f, 4.0f, 64.0f};

// Element i passes where |gpu − cpu| ≤ rtol·|cpu_i| + atol·rms(cpu); with `norm` set, the whole
// also where ‖gpu − cpu‖₂ ≤ norm·‖cpu‖₂. per_head: the rms is that of the element's head (its
// token's `row` channels, which for_heads names) where it is the larger, not the whole tensor's
// alone (a head that is 0 but for rounding, as a first query's dq, keeps the tensor's).
struct Tolerance {
  double rtol, atol, norm = 0.0;
  bool per_head = false;
  int row = 0;
};
Tolerance for_heads(Tolerance tol, int hs) {
  if (tol.per_head) tol.row = hs;
  return tol;
}
constexpr Tolerance kExact{0.0, 0.0}, kF32{1e-5, 1e-5}, kGemm{1e-4, 1e-4}, kBf16{1e-2, 1e-2};
// The 16-bit attention on the tensor cores (ours, cuDNN's) against the CPU's f32 products on the
// same 16-bit values: the GPU rounds dy, P and dS to the operand type, each term 2^-8 (bf16) apart,
// so an element's error follows its terms' magnitudes — the first keys' dk and dv gather terms
// from every query — not its own value or the tensor's rms: the rms of its head's channels
// (which gather the same terms) stands for them. At T = 1024 the first key's dk and dv hold
// several times the tensor's rms (measured on the CUDA emulator). Held norm-wise to 1e-2 (a few
// roundings of bf16's 3.9e-3 per term, averaged over the sums), each element to ten times kBf16:
// a wrong row, head, tile or mask is far past both.
constexpr Tolerance kAttention16{1e-1, 1e-1, 1e-2, true};
// Results that go through a sum of n f32 terms summed in another order on each backend (a row's
// exponentials): its rounding errors grow as a random walk, √n · 2^-24, and the softmax's values
// inherit them relative (p = e^(x − log Σ)). At GPT-2's 50,257 that is 1.3e-5, past kF32's 1e-5:
// the CUDA emulator measured 1.14e-5 on the row whose largest probability is 0.92 (one term near
// 1, the other 50,256 each lost to a sum that holds it). Twice the walk, and never below kF32.
Tolerance summed_over(int n) { return {std::max(kF32.rtol, 2.0 * std::sqrt(double(n)) * 0x1p-24), kF32.atol}; }

kernels::Backend& gpu_backend() { return *kernels::find_backend("cuda"); }

Context g_cpu, g_gpu;

std::vector<float> random_floats(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<int32_t> random_tokens(size_t n, int below, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % below);
  return v;
}

// The same values on the host (for the CPU backend) and on the GPU.
template <class T>
struct Twin {
  std::vector<T> host;
  Buffer<T> device;
  explicit Twin(std::vector<T> values)
      : host(std::move(values)), device(host.size(), MemoryCategory::Workspace, gpu_backend(), MemoryKind::device) {
    kernels::upload(g_gpu, tensor(), host.data());
  }
  explicit Twin(size_t n, T fill = T{}) : Twin(std::vector<T>(n, fill)) {}
  // 16-bit twins name their dtype (bf16 where only the bytes matter).
  static constexpr DType kDefault = sizeof(T) == 2 ? DType::bf16 : DType::f32;
  Tensor tensor(DType dtype = kDefault) const {
    if constexpr (sizeof(T) == 2) return view(device.data(), dtype, host.size(), gpu_backend().device());
    else return view(device.data(), host.size(), gpu_backend().device());
  }
  Tensor host_tensor(DType dtype = kDefault) {
    if constexpr (sizeof(T) == 2) return view(host.data(), dtype, host.size());
    else return view(host.data(), host.size());
  }
  T* cpu() { return host.data(); }
  T* gpu() { return device.data(); }
  // Seen as `shape` (of the twin's elements), what a kernel reads its sizes from.
  Tensor on_cpu(Shape shape, DType dtype = kDefault) { return host_tensor(dtype).reshaped(shape); }
  Tensor on_gpu(Shape shape, DType dtype = kDefault) const { return tensor(dtype).reshaped(shape); }
  std::vector<T> from_gpu(DType dtype = kDefault) const {
    std::vector<T> out(host.size());
    kernels::download(g_gpu, out.data(), tensor(dtype));
    return out;
  }
};
using Floats = Twin<float>;
using Tokens = Twin<int32_t>;
using Halves = Twin<low16>;

// The parts of x between consecutive cuts (the gradient norm's tensors), on the GPU and on the host.
struct Parts {
  std::vector<Tensor> gpu, cpu;
};
Parts parts_at(Floats& x, std::initializer_list<size_t> cuts) {
  Parts parts;
  for (auto cut = cuts.begin(); cut + 1 != cuts.end(); ++cut) {
    parts.gpu.push_back(x.tensor().elements(*cut, cut[1] - *cut));
    parts.cpu.push_back(x.host_tensor().elements(*cut, cut[1] - *cut));
  }
  return parts;
}

// The worst |gpu − cpu| / (rtol·|cpu| + atol·rms(cpu)) over the elements; exact: the count of
// elements whose bits differ.
struct Verdict {
  double worst = 0.0;
  std::string detail;
};

Verdict compare(const std::vector<float>& gpu, const std::vector<float>& cpu, Tolerance tol, const std::string& what) {
  Verdict v;
  if (tol.rtol == 0.0 && tol.atol == 0.0) {
    size_t differ = 0;
    for (size_t i = 0; i < cpu.size(); ++i) differ += std::memcmp(&gpu[i], &cpu[i], sizeof(float)) != 0;
    v.worst = differ ? 2.0 : 0.0;
    if (differ) v.detail = what + ": " + std::to_string(differ) + " of " + std::to_string(cpu.size()) + " differ";
    return v;
  }
  double squares = 0.0;
  for (float x : cpu) squares += static_cast<double>(x) * x;
  const double rms = cpu.empty() ? 0.0 : std::sqrt(squares / cpu.size());
  // The rms that atol scales: the whole tensor's, or that of each run of `row` elements (a head)
  // where larger.
  std::vector<double> row_rms;
  if (tol.per_head && tol.row > 0 && cpu.size() % size_t(tol.row) == 0) {
    for (size_t begin = 0; begin < cpu.size(); begin += size_t(tol.row)) {
      double sum = 0.0;
      for (size_t i = begin; i < begin + size_t(tol.row); ++i) sum += static_cast<double>(cpu[i]) * cpu[i];
      row_rms.push_back(std::sqrt(sum / tol.row));
    }
  }
  size_t at = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double scale = row_rms.empty() ? rms : std::max(rms, row_rms[i / size_t(tol.row)]);
    const double bound = tol.rtol * std::fabs(cpu[i]) + tol.atol * scale + 1e-30;
    const double error = std::isnan(gpu[i]) != std::isnan(cpu[i]) ? 1e30 : std::fabs(gpu[i] - cpu[i]) / bound;
    if (error > v.worst) v.worst = error, at = i;
  }
  if (!cpu.empty())
    v.detail = what + ": worst " + std::to_string(v.worst) + " of tolerance at " + std::to_string(at) + " (gpu " +
               std::to_string(gpu[at]) + ", cpu " + std::to_string(cpu[at]) + ")";
  if (tol.norm > 0.0 && !cpu.empty()) {
    double differences = 0.0;
    for (size_t i = 0; i < cpu.size(); ++i) differences += (double(gpu[i]) - cpu[i]) * (double(gpu[i]) - cpu[i]);
    const double relative = std::sqrt(differences / std::max(squares, 1e-300));
    const double share = std::isnan(relative) ? 1e30 : relative / tol.norm;
    v.worst = std::max(v.worst, share);
    v.detail += "; norm-wise " + std::to_string(relative) + " (" + std::to_string(share) + " of tolerance)";
  }
  return v;
}

Verdict compare_bits(const std::vector<low16>& gpu, const std::vector<low16>& cpu, const std::string& what) {
  size_t differ = 0;
  for (size_t i = 0; i < cpu.size(); ++i) differ += gpu[i] != cpu[i];
  return {differ ? 2.0 : 0.0, differ ? what + ": " + std::to_string(differ) + " values differ" : ""};
}

// Several comparisons of one operation: the worst of them decides. skipped: why the check could
// not run in this build (a SKIP line, not a failure).
struct Report {
  std::vector<Verdict> verdicts;
  std::string skipped;
  void add(Verdict v) { verdicts.push_back(std::move(v)); }
  void add(const Floats& twin, Tolerance tol, const std::string& what) { add(compare(twin.from_gpu(), twin.host, tol, what)); }
};

struct Check {
  const char* name;
  std::function<void(Report&)> run;
};

// ---- the checks ------------------------------------------------------------------------------

// --gpt2: the checks that have one at GPT-2 124M's sizes (B = 2, T = 1024, C = 768, NH = 12,
// V = 50304: a tile count, a grid and a workspace the small sizes never reach) run at those.
bool g_gpt2 = false;
int sized(int small, int gpt2) { return g_gpt2 ? gpt2 : small; }

void memory_ops(Report& r) {
  Floats a(random_floats(10007, 1)), b(10007);
  kernels::copy(g_cpu, b.host_tensor(), a.host_tensor());
  kernels::copy(g_gpu, b.tensor(), a.tensor());
  r.add(b, kExact, "copy");
  const double cpu_sum = kernels::sum(g_cpu, a.host_tensor()), gpu_sum = kernels::sum(g_gpu, a.tensor());
  r.add({cpu_sum == gpu_sum ? 0.0 : 2.0, "sum " + std::to_string(gpu_sum) + " vs " + std::to_string(cpu_sum)});
  kernels::clear(g_gpu, a.tensor());
  r.add(compare(a.from_gpu(), std::vector<float>(a.host.size(), 0.0f), kExact, "clear"));
}

void conversions(Report& r) {
  std::vector<float> values = random_floats(70001, 2, 100.0f);  // more than one narrowing block
  for (size_t i = 0; i < values.size(); i += 97) values[i] = std::ldexp(values[i], -30);  // fp16 subnormals
  values[5] = 1e6f, values[6] = -INFINITY, values[7] = NAN;
  for (DType type : {DType::bf16, DType::fp16}) {
    const std::string t = dtype_name(type);
    Floats in(values), stored(values), rounded(values), narrowed(values), widened(values.size());
    Halves out(values.size()), kept(values.size());
    kernels::convert(g_cpu, out.host_tensor(type), in.host_tensor());
    kernels::convert(g_gpu, out.tensor(type), in.tensor());
    r.add(compare_bits(out.from_gpu(type), out.host, "convert f32 -> " + t));
    kernels::convert(g_cpu, widened.host_tensor(), out.host_tensor(type));
    kernels::convert(g_gpu, widened.tensor(), out.tensor(type));
    r.add(widened, kExact, "convert " + t + " -> f32");
    kernels::store(g_cpu, kept.host_tensor(type), stored.host_tensor());
    kernels::store(g_gpu, kept.tensor(type), stored.tensor());
    r.add(compare_bits(kept.from_gpu(type), kept.host, "store (kept) " + t));
    r.add(stored, kExact, "store (values) " + t);
    kernels::round_to(g_cpu, rounded.host_tensor(), type);
    kernels::round_to(g_gpu, rounded.tensor(), type);
    r.add(rounded, kExact, "round_to " + t);
    kernels::narrow(g_cpu, narrowed.host_tensor(), type);
    kernels::narrow(g_gpu, narrowed.tensor(), type);
    std::vector<low16> cpu_half(values.size()), gpu_half(values.size());
    std::memcpy(cpu_half.data(), narrowed.host.data(), cpu_half.size() * 2);
    const std::vector<float> gpu_all = narrowed.from_gpu();
    std::memcpy(gpu_half.data(), gpu_all.data(), gpu_half.size() * 2);
    r.add(compare_bits(gpu_half, cpu_half, "narrow " + t));
  }
}

// 16-bit values of `type` on one side, widened.
std::vector<float> widened(const Halves& halves, DType type, bool on_gpu) {
  const std::vector<low16> bits = on_gpu ? halves.from_gpu(type) : halves.host;
  std::vector<float> out(bits.size());
  kernels::convert(g_cpu, view(out.data(), out.size()), view(bits.data(), type, bits.size()));
  return out;
}

// A result's f32 values on one side, whatever its type: f32 as they are, 16-bit widened.
std::vector<float> values_of(const Floats& f32, const Halves& halves, DType type, bool on_gpu) {
  if (type == DType::f32) return on_gpu ? f32.from_gpu() : f32.host;
  return widened(halves, type, on_gpu);
}

// A result of `type` (in f32 or in halves), the GPU's against the CPU's.
Verdict compare_typed(const Floats& f32, const Halves& halves, DType type, Tolerance tol, const std::string& what) {
  return compare(values_of(f32, halves, type, true), values_of(f32, halves, type, false), tol, what);
}

// A linear layer's x (M, K) and w (N, K) of `type` on both sides: the f32 twins, or their
// 16-bit roundings (the same bits on both).
struct LinearOperands {
  Tensor x_cpu, w_cpu, x_gpu, w_gpu;
};
LinearOperands linear_operands(DType type, Floats& x32, Floats& w32, Halves& x_low, Halves& w_low, int M, int K, int N) {
  if (type == DType::f32) return {x32.on_cpu({M, K}), w32.on_cpu({N, K}), x32.on_gpu({M, K}), w32.on_gpu({N, K})};
  kernels::convert(g_cpu, x_low.host_tensor(type), x32.host_tensor());
  kernels::convert(g_cpu, w_low.host_tensor(type), w32.host_tensor());
  kernels::upload(g_gpu, x_low.tensor(type), x_low.host.data());
  kernels::upload(g_gpu, w_low.tensor(type), w_low.host.data());
  return {x_low.on_cpu({M, K}, type), w_low.on_cpu({N, K}, type), x_low.on_gpu({M, K}, type), w_low.on_gpu({N, K}, type)};
}

// The linear layer, f32 and bf16, with and without bias; backward with dbias, with dx skipped,
// and (bf16) with dy narrowed in place.
void linear(Report& r, DType type) {
  const int M = sized(96, 2048), K = sized(80, 768), N = sized(72, 3072);  // GPT-2's fc layer
  const std::string t = dtype_name(type);
  Floats x32(random_floats(M * K, 3)), w32(random_floats(N * K, 4, 0.1f)), bias(random_floats(N + 4, 5));
  Halves x_low(M * K), w_low(N * K);
  const auto [x_cpu, w_cpu, x_gpu, w_gpu] = linear_operands(type, x32, w32, x_low, w_low, M, K, N);
  kernels::prepare_linear(g_gpu, kernels::precision_of(type), M, K, N, true);
  Floats y(M * N);
  const Device gpu = gpu_backend().device();
  kernels::linear_forward(g_cpu, y.host_tensor(), x_cpu, w_cpu, view(bias.cpu(), N));
  kernels::linear_forward(g_gpu, y.tensor(), x_gpu, w_gpu, view(bias.gpu(), N, gpu));
  r.add(y, kGemm, t + " linear forward with bias");
  // A bias 4 bytes off alignment (added after the product), and one 16 bytes aligned, not 32 (a
  // tensor rank's slice of the parameters: the epilogue's algorithm chosen for that alignment).
  for (const int off : {1, 4}) {
    kernels::linear_forward(g_cpu, y.host_tensor(), x_cpu, w_cpu, view(bias.cpu() + off, N));
    kernels::linear_forward(g_gpu, y.tensor(), x_gpu, w_gpu, view(bias.gpu() + off, N, gpu));
    r.add(y, kGemm, t + " linear forward with a bias " + std::to_string(4 * off) + " bytes off alignment");
  }
  kernels::linear_forward(g_cpu, y.host_tensor(), x_cpu, w_cpu, Tensor{});
  kernels::linear_forward(g_gpu, y.tensor(), x_gpu, w_gpu, Tensor{});
  r.add(y, kGemm, t + " linear forward");
  if (type != DType::f32) {  // y written in 16 bits (cuBLASLt's BIAS epilogue), the CPU's f32 sums rounded
    Floats y16_bias(bias.host);  // a 16-bit model's f32 bias is its 16-bit parameter widened
    kernels::round_to(g_cpu, y16_bias.host_tensor(), type);
    kernels::upload(g_gpu, y16_bias.tensor(), y16_bias.cpu());
    Halves y_low(M * N);
    for (bool with_bias : {true, false}) {
      kernels::linear_forward(g_cpu, y_low.on_cpu({M, N}, type), x_cpu, w_cpu,
                              with_bias ? view(y16_bias.cpu(), N) : Tensor{});
      kernels::linear_forward(g_gpu, y_low.on_gpu({M, N}, type), x_gpu, w_gpu,
                              with_bias ? view(y16_bias.gpu(), N, gpu) : Tensor{});
      r.add(compare_typed(y, y_low, type, kBf16, t + " linear forward into " + t + (with_bias ? " with bias" : "")));
    }
  }
  Floats dy(random_floats(M * N, 6)), dx(M * K, 7.0f), dw(random_floats(N * K, 7)), db(random_floats(N, 8));
  Halves dy_low(M * N);
  const DType low = type == DType::f32 ? DType::bf16 : type;
  kernels::linear_backward(g_cpu, dx.host_tensor(), dw.host_tensor(), db.host_tensor(), dy.host_tensor(),
                           dy_low.host_tensor(low), x_cpu, w_cpu);
  kernels::linear_backward(g_gpu, dx.tensor(), dw.tensor(), db.tensor(), dy.tensor(), dy_low.tensor(low), x_gpu, w_gpu);
  r.add(dx, kGemm, t + " linear backward dx");
  r.add(dw, kGemm, t + " linear backward dw (+=)");
  r.add(db, kF32, t + " linear backward dbias (+=, chunks of rows)");
  Floats db_alone(random_floats(N, 10));  // the bias gradient alone, for a dy its producer rounded
  kernels::bias_gradient(g_cpu, db_alone.host_tensor(), dy.on_cpu({M, N}));
  kernels::bias_gradient(g_gpu, db_alone.tensor(), dy.on_gpu({M, N}));
  r.add(db_alone, kF32, t + " bias_gradient (+=, chunks of rows)");
  if (type == DType::f32) return;
  // dy narrowed in place (no dbias), dx skipped.
  Floats dy2(random_floats(M * N, 9));
  const Tensor cpu_narrowed = kernels::narrow(g_cpu, dy2.host_tensor(), type);
  const Tensor gpu_narrowed = kernels::narrow(g_gpu, dy2.tensor(), type);
  kernels::linear_backward(g_cpu, Tensor{}, dw.host_tensor(), Tensor{}, dy2.host_tensor(), cpu_narrowed, x_cpu, w_cpu);
  kernels::linear_backward(g_gpu, Tensor{}, dw.tensor(), Tensor{}, dy2.tensor(), gpu_narrowed, x_gpu, w_gpu);
  r.add(dw, kGemm, t + " linear backward dw, dy narrowed in place");
}

// The GELU layer's checks: with and without bias, and for 16-bit outputs both with cuBLASLt's
// epilogues (where it offers them: a refusal is said on stderr and runs the passes) and without
// (cuda.gelu_epilogues = off: the GEMM and the passes apart). f32 outputs never use them.
std::vector<std::pair<bool, bool>> gelu_layer_ways(bool low) {
  if (!low) return {{true, false}, {false, false}};
  return {{true, true}, {false, true}, {true, false}, {false, false}};
}

// The GELU layer (cuBLASLt's GELU_AUX_BIAS epilogue, or the GEMM and one pass) against the CPU's
// parts: pre and act in the operands' type, with and without bias; then GELU's backward from the
// 16-bit values kept. 16-bit results are compared widened, at one storage unit (a rounding tie of
// sums that differ in their last bits, and the epilogue's GELU of the unrounded sums).
void linear_gelu(Report& r, DType type) {
  const int M = sized(96, 2048), K = sized(80, 768), N = sized(72, 3072);  // GPT-2's fc layer
  const std::string t = dtype_name(type);
  const bool low = type != DType::f32;
  Floats x32(random_floats(M * K, 13)), w32(random_floats(N * K, 14, 0.1f)), bias(random_floats(N, 15));
  Halves x_low(M * K), w_low(N * K);
  const auto [x_cpu, w_cpu, x_gpu, w_gpu] = linear_operands(type, x32, w32, x_low, w_low, M, K, N);
  if (low) {  // a 16-bit model's f32 bias is its 16-bit parameter widened (what the epilogue reads rounded back)
    kernels::round_to(g_cpu, bias.host_tensor(), type);
    kernels::upload(g_gpu, bias.tensor(), bias.host.data());
  }
  const Device gpu = gpu_backend().device();
  const size_t n = static_cast<size_t>(M) * N;
  Floats pre32(n), act32(n);
  Halves pre_low(n), act_low(n);
  const Tolerance tol = low ? kBf16 : kGemm;
  for (const auto& [with_bias, fused] : gelu_layer_ways(low)) {
    g_gpu.gelu_epilogues = fused;
    const std::string what = t + " GELU layer" + (with_bias ? " with bias" : "") + (fused ? "" : " (unfused)");
    const Tensor pre_cpu = low ? pre_low.on_cpu({M, N}, type) : pre32.on_cpu({M, N});
    const Tensor act_cpu = low ? act_low.on_cpu({M, N}, type) : act32.on_cpu({M, N});
    const Tensor pre_gpu = low ? pre_low.on_gpu({M, N}, type) : pre32.on_gpu({M, N});
    const Tensor act_gpu = low ? act_low.on_gpu({M, N}, type) : act32.on_gpu({M, N});
    kernels::linear_gelu_forward(g_cpu, pre_cpu, act_cpu, x_cpu, w_cpu, with_bias ? view(bias.cpu(), N) : Tensor{});
    kernels::linear_gelu_forward(g_gpu, pre_gpu, act_gpu, x_gpu, w_gpu, with_bias ? view(bias.gpu(), N, gpu) : Tensor{});
    r.add(compare_typed(pre32, pre_low, type, tol, what + ": pre"));
    r.add(compare_typed(act32, act_low, type, tol, what + ": act"));
  }
  g_gpu.gelu_epilogues = true;
  if (!low) return;
  Floats dout(random_floats(n, 16)), dx(n);
  kernels::upload(g_gpu, pre_low.tensor(type), pre_low.host.data());  // the same kept values on both
  kernels::gelu_backward(g_cpu, dx.host_tensor(), pre_low.host_tensor(type), dout.host_tensor());
  kernels::gelu_backward(g_gpu, dx.tensor(), pre_low.tensor(type), dout.tensor());
  r.add(dx, kF32, t + " gelu backward from the kept values");
}

// GELU's backward through the MLP's output layer in one operation (cuBLASLt's DGELU epilogue, or
// the GEMM and one pass) against the CPU's: dpre in pre's type and the input layer's bias
// gradient (+=), with and without it. The epilogue's dbias is summed from the 16-bit dpre it
// wrote, the CPU's from the f32 values: both at kBf16 (1% of each value plus 1% of the rms; the
// sums' rounding differences are ~0.2% of the rms at GPT-2's sizes).
void linear_gelu_backward(Report& r, DType type) {
  const int M = sized(96, 2048), K = sized(80, 3072), N = sized(72, 768);  // GPT-2's fcproj: pre (M, 4C), dy (M, C)
  const std::string t = dtype_name(type);
  const bool low = type != DType::f32;
  const size_t n = static_cast<size_t>(M) * K;
  Floats pre32(random_floats(n, 17)), w32(random_floats(size_t(N) * K, 18, 0.1f)), dy32(random_floats(size_t(M) * N, 19));
  Halves pre_low(n), w_low(size_t(N) * K), dy_low(size_t(M) * N);
  // pre (M, K) and w (N, K) as linear_operands makes x and w; dy (M, N) in the same type.
  const auto [pre_cpu, w_cpu, pre_gpu, w_gpu] = linear_operands(type, pre32, w32, pre_low, w_low, M, K, N);
  Tensor dy_cpu = dy32.on_cpu({M, N}), dy_gpu = dy32.on_gpu({M, N});
  if (low) {
    kernels::convert(g_cpu, dy_low.host_tensor(type), dy32.host_tensor());
    kernels::upload(g_gpu, dy_low.tensor(type), dy_low.host.data());
    dy_cpu = dy_low.on_cpu({M, N}, type), dy_gpu = dy_low.on_gpu({M, N}, type);
  }
  Floats dpre32(n), db(random_floats(K, 20));
  Halves dpre_low(n);
  const Tensor dpre_cpu = low ? dpre_low.on_cpu({M, K}, type) : dpre32.on_cpu({M, K});
  const Tensor dpre_gpu = low ? dpre_low.on_gpu({M, K}, type) : dpre32.on_gpu({M, K});
  const Tolerance tol = low ? kBf16 : kGemm;
  for (const auto& [with_bias, fused] : gelu_layer_ways(low)) {
    g_gpu.gelu_epilogues = fused;
    const std::string what =
        t + " GELU layer backward" + (with_bias ? " with its bias gradient" : "") + (fused ? "" : " (unfused)");
    kernels::linear_gelu_backward(g_cpu, dpre_cpu, with_bias ? db.host_tensor() : Tensor{}, dy_cpu, pre_cpu, w_cpu);
    kernels::linear_gelu_backward(g_gpu, dpre_gpu, with_bias ? db.tensor() : Tensor{}, dy_gpu, pre_gpu, w_gpu);
    r.add(compare_typed(dpre32, dpre_low, type, tol, what + ": dpre"));
    if (with_bias) r.add(db, tol, what + ": dbias (+=)");
  }
  g_gpu.gelu_epilogues = true;
}

void batched(Report& r, bool bf16_operands) {
  const int batch = 3, M = 40, N = 24, K = 56;
  for (int case_index = 0; case_index < 4; ++case_index) {
    const bool ta = case_index & 1, tb = case_index & 2;
    Floats a(random_floats(batch * M * K, 10 + case_index)), b(random_floats(batch * K * N, 20 + case_index));
    Floats c(random_floats(batch * M * N, 30));
    const std::string what = std::string(bf16_operands ? "bf16" : "f32") + " batched_matmul ta=" + (ta ? "1" : "0") +
                             " tb=" + (tb ? "1" : "0");
    const Shape c_shape{batch, M, N}, a_shape{batch, ta ? K : M, ta ? M : K}, b_shape{batch, tb ? N : K, tb ? K : N};
    if (!bf16_operands) {
      kernels::batched_matmul(g_cpu, c.on_cpu(c_shape), a.on_cpu(a_shape), b.on_cpu(b_shape), ta, tb, case_index == 3);
      kernels::batched_matmul(g_gpu, c.on_gpu(c_shape), a.on_gpu(a_shape), b.on_gpu(b_shape), ta, tb, case_index == 3);
    } else {
      Halves a16(a.host.size()), b16(b.host.size());
      kernels::convert(g_cpu, a16.host_tensor(DType::bf16), a.host_tensor());
      kernels::convert(g_cpu, b16.host_tensor(DType::bf16), b.host_tensor());
      kernels::upload(g_gpu, a16.tensor(DType::bf16), a16.cpu());
      kernels::upload(g_gpu, b16.tensor(DType::bf16), b16.cpu());
      kernels::batched_matmul_bf16(g_cpu, c.on_cpu(c_shape), a16.on_cpu(a_shape), b16.on_cpu(b_shape), ta, tb,
                                   case_index == 3);
      kernels::batched_matmul_bf16(g_gpu, c.on_gpu(c_shape), a16.on_gpu(a_shape), b16.on_gpu(b_shape), ta, tb,
                                   case_index == 3);
    }
    r.add(c, kGemm, what + (case_index == 3 ? " (+=)" : ""));
  }
}

// The attention layout: heads read out of a fused (B, T, 3C) activation, written into (B, T, C).
void strided(Report& r, bool bf16_operands) {
  const int B = 2, T = sized(32, 1024), C = sized(64, 768), NH = sized(4, 12), hs = C / NH;
  const kernels::Strides head{int64_t(T) * 3 * C, hs, 3 * C, 1}, head_t{int64_t(T) * 3 * C, hs, 1, 3 * C};
  const kernels::Strides probs{int64_t(NH) * T * T, int64_t(T) * T, T, 1};
  Floats qkv(random_floats(B * T * 3 * C, 40)), s(B * NH * T * T, 1.0f);
  Halves qkv16(qkv.host.size());
  const std::string t = bf16_operands ? "bf16" : "f32";
  const size_t keys = qkv.host.size() - C;  // the elements from k's first onwards
  const Device gpu = gpu_backend().device();
  for (bool accumulate : {false, true}) {
    if (!bf16_operands) {
      kernels::strided_matmul(g_cpu, s.host_tensor(), probs, qkv.host_tensor(), head, view(qkv.cpu() + C, keys), head_t,
                              B, NH, T, T, hs, accumulate);
      kernels::strided_matmul(g_gpu, s.tensor(), probs, qkv.tensor(), head, view(qkv.gpu() + C, keys, gpu), head_t, B,
                              NH, T, T, hs, accumulate);
    } else {
      kernels::convert(g_cpu, qkv16.host_tensor(DType::bf16), qkv.host_tensor());
      kernels::upload(g_gpu, qkv16.tensor(DType::bf16), qkv16.cpu());
      kernels::strided_matmul_bf16(g_cpu, s.host_tensor(), probs, qkv16.host_tensor(), head,
                                   view(qkv16.cpu() + C, DType::bf16, keys), head_t, B, NH, T, T, hs, accumulate);
      kernels::strided_matmul_bf16(g_gpu, s.tensor(), probs, qkv16.tensor(), head,
                                   view(qkv16.gpu() + C, DType::bf16, keys, gpu), head_t, B, NH, T, T, hs, accumulate);
    }
    r.add(s, kGemm, t + " strided_matmul q kᵀ" + (accumulate ? " (+=)" : ""));
  }
}

// A row kernel's output written in bf16 and fp16 on the GPU (run_gpu into `out`) against its own
// f32 output there (gpu_f32), rounded to nearest even on the CPU: the same bits.
void add_low16_outputs(Report& r, const Floats& gpu_f32, const std::string& what,
                       const std::function<void(const Tensor& out)>& run_gpu) {
  const std::vector<float> values = gpu_f32.from_gpu();
  for (DType type : {DType::bf16, DType::fp16}) {
    Halves out(values.size());
    run_gpu(out.tensor(type));
    std::vector<low16> rounded(values.size());
    kernels::convert(g_cpu, view(rounded.data(), type, rounded.size()), view(values.data(), values.size()));
    r.add(compare_bits(out.from_gpu(type), rounded, what + " written in " + dtype_name(type)));
  }
}

// A norm's backward from a 16-bit model's kept input (widened as the kernels read it) against the
// GPU's own f32 backward on the widened values: bit for bit. run(inp, dinp, dweight, dbias, copy)
// runs one backward on the GPU into fresh copies of the held gradients (copy: dinp_low, or empty).
// With dinp's 16-bit copy written in the same pass, from either input: the same gradients, and the
// copy is dinp rounded on the CPU, bit for bit.
using NormBackward = std::function<void(const Tensor&, Floats&, Floats&, Floats&, const Tensor&)>;
void add_low16_input_backward(Report& r, const Floats& x, int N, int C, const std::string& what,
                              const NormBackward& run) {
  for (const DType type : {DType::bf16, DType::fp16}) {
    Halves x16(x.host.size());
    kernels::convert(g_cpu, x16.host_tensor(type), view(const_cast<float*>(x.host.data()), x.host.size()));
    kernels::upload(g_gpu, x16.tensor(type), x16.cpu());
    Floats widened_x(x.host.size());
    kernels::convert(g_cpu, widened_x.host_tensor(), x16.host_tensor(type));
    kernels::upload(g_gpu, widened_x.tensor(), widened_x.cpu());
    Floats dx32(random_floats(N * C, 57)), dw32(random_floats(C, 58)), db32(random_floats(C, 59));
    Floats dx16(dx32.host), dw16(dw32.host), db16(db32.host);
    run(widened_x.on_gpu({N, C}), dx32, dw32, db32, Tensor{});
    run(x16.on_gpu({N, C}, type), dx16, dw16, db16, Tensor{});
    const std::string t = std::string(" from ") + dtype_name(type) + " input";
    r.add(compare(dx16.from_gpu(), dx32.from_gpu(), kExact, what + " dinp" + t));
    r.add(compare(dw16.from_gpu(), dw32.from_gpu(), kExact, what + " dweight" + t));
    r.add(compare(db16.from_gpu(), db32.from_gpu(), kExact, what + " dbias" + t));
    for (const bool low_input : {false, true}) {
      Floats dx(dx32.host), dw(dw32.host), db(db32.host);  // the held values again
      Halves copy(x.host.size(), 0xFFFF);
      run(low_input ? x16.on_gpu({N, C}, type) : widened_x.on_gpu({N, C}), dx, dw, db, copy.tensor(type));
      const std::string c = what + " dinp beside its " + dtype_name(type) + " copy" + (low_input ? t : " from f32 input");
      const std::vector<float> values = dx.from_gpu();
      r.add(compare(values, dx32.from_gpu(), kExact, c));
      r.add(compare(dw.from_gpu(), dw32.from_gpu(), kExact, c + " (dweight)"));
      std::vector<low16> rounded(values.size());
      kernels::convert(g_cpu, view(rounded.data(), type, rounded.size()), view(values.data(), values.size()));
      r.add(compare_bits(copy.from_gpu(type), rounded, c + " (the copy)"));
    }
  }
}

void layernorm(Report& r) {
  const int N = sized(67, 2048), C = sized(200, 768);
  Floats x(random_floats(N * C, 50, 2.0f)), w(random_floats(C, 51)), b(random_floats(C, 52)), y(N * C), mean(N),
      var(N);
  kernels::layernorm_forward(g_cpu, y.host_tensor(), mean.host_tensor(), var.host_tensor(), x.on_cpu({N, C}),
                             w.host_tensor(), b.host_tensor());
  kernels::layernorm_forward(g_gpu, y.tensor(), mean.tensor(), var.tensor(), x.on_gpu({N, C}), w.tensor(), b.tensor());
  r.add(y, kF32, "layernorm out");
  r.add(mean, kF32, "layernorm mean");
  r.add(var, kF32, "layernorm variance");
  add_low16_outputs(r, y, "layernorm out", [&](const Tensor& out) {
    kernels::layernorm_forward(g_gpu, out, mean.tensor(), var.tensor(), x.on_gpu({N, C}), w.tensor(), b.tensor());
  });
  // Backward from the CPU's statistics on both, so that only backward is compared.
  kernels::upload(g_gpu, mean.tensor(), mean.cpu());
  kernels::upload(g_gpu, var.tensor(), var.cpu());
  Floats dout(random_floats(N * C, 53)), dx(random_floats(N * C, 54)), dw(random_floats(C, 55)), db(random_floats(C, 56));
  kernels::layernorm_backward(g_cpu, dx.host_tensor(), dw.host_tensor(), db.host_tensor(), dout.host_tensor(),
                              x.on_cpu({N, C}), w.host_tensor(), b.host_tensor(), mean.host_tensor(),
                              var.host_tensor());
  kernels::layernorm_backward(g_gpu, dx.tensor(), dw.tensor(), db.tensor(), dout.tensor(), x.on_gpu({N, C}), w.tensor(),
                              b.tensor(), mean.tensor(), var.tensor());
  r.add(dx, Tolerance{1e-4, 1e-4}, "layernorm dinp (+=)");
  r.add(dw, Tolerance{1e-4, 1e-4}, "layernorm dweight (+=)");
  r.add(db, Tolerance{1e-4, 1e-4}, "layernorm dbias (+=)");
  // Its column sums' chunks (two sums a column, at least one chunk) came from the stream-ordered
  // pool, whose peak the backend reports as the untracked scratch (metrics' stream_scratch_peak).
  // Not judged under a tool injected into CUDA (compute-sanitizer, which gpu-check.sh runs with
  // TRIDENT_CUDA_TOOL set; Nsight's tools, with CUDA_INJECTION64_PATH), which may serve the
  // stream-ordered allocations from memory of its own.
  const double scratch = gpu_backend().stream_scratch_peak(), least = 2.0 * C * sizeof(float);
  const bool tool = std::getenv("TRIDENT_CUDA_TOOL") != nullptr || std::getenv("CUDA_INJECTION64_PATH") != nullptr;
  r.add({scratch >= least || tool ? 0.0 : 2.0,
         "stream-ordered scratch at its peak " + std::to_string(scratch) + " bytes after layernorm_backward (at least " +
             std::to_string(least) + (tool ? "; not judged under a CUDA tool)" : ")")});
  add_low16_input_backward(r, x, N, C, "layernorm",
                           [&](const Tensor& inp, Floats& dinp, Floats& dweight, Floats& dbias, const Tensor& copy) {
                             kernels::layernorm_backward(g_gpu, dinp.tensor(), dweight.tensor(), dbias.tensor(),
                                                         dout.tensor(), inp, w.tensor(), b.tensor(), mean.tensor(),
                                                         var.tensor(), copy);
                           });
}

void gelu(Report& r) {
  const size_t n = 100003;
  Floats x(random_floats(n, 60, 3.0f)), y(n), dout(random_floats(n, 61)), dx(n);
  kernels::gelu_forward(g_cpu, y.host_tensor(), x.host_tensor());
  kernels::gelu_forward(g_gpu, y.tensor(), x.tensor());
  r.add(y, Tolerance{1e-5, 5e-7}, "gelu forward");  // oneDNN's tanh form loses the far tail (unit tests)
  kernels::gelu_backward(g_cpu, dx.host_tensor(), x.host_tensor(), dout.host_tensor());
  kernels::gelu_backward(g_gpu, dx.tensor(), x.tensor(), dout.tensor());
  r.add(dx, kF32, "gelu backward");
}

// Llama's parts (kernels/common/llama_math.hpp on both): RMSNorm's reductions in another order,
// cosf/sinf/powf and expf from CUDA's libm, the grouped-query copies exact and its sums in order.
void llama_parts(Report& r) {
  const int N = sized(67, 2048), C = sized(200, 4096);
  Floats x(random_floats(N * C, 90, 2.0f)), w(random_floats(C, 91)), y(N * C), rstd(N);
  kernels::rmsnorm_forward(g_cpu, y.host_tensor(), rstd.host_tensor(), x.on_cpu({N, C}), w.host_tensor(), 1e-5f);
  kernels::rmsnorm_forward(g_gpu, y.tensor(), rstd.tensor(), x.on_gpu({N, C}), w.tensor(), 1e-5f);
  r.add(y, kF32, "rmsnorm out");
  r.add(rstd, kF32, "rmsnorm rstd");
  add_low16_outputs(r, y, "rmsnorm out", [&](const Tensor& out) {
    kernels::rmsnorm_forward(g_gpu, out, rstd.tensor(), x.on_gpu({N, C}), w.tensor(), 1e-5f);
  });
  kernels::upload(g_gpu, rstd.tensor(), rstd.cpu());  // backward from the CPU's statistics on both
  Floats dout(random_floats(N * C, 92)), dx(random_floats(N * C, 93)), dw(random_floats(C, 94));
  kernels::rmsnorm_backward(g_cpu, dx.host_tensor(), dw.host_tensor(), dout.host_tensor(), x.on_cpu({N, C}),
                            w.host_tensor(), rstd.host_tensor());
  kernels::rmsnorm_backward(g_gpu, dx.tensor(), dw.tensor(), dout.tensor(), x.on_gpu({N, C}), w.tensor(), rstd.tensor());
  r.add(dx, Tolerance{1e-4, 1e-4}, "rmsnorm dinp (+=)");
  r.add(dw, Tolerance{1e-4, 1e-4}, "rmsnorm dweight (+=)");
  add_low16_input_backward(r, x, N, C, "rmsnorm",
                           [&](const Tensor& inp, Floats& dinp, Floats& dweight, Floats&, const Tensor& copy) {
                             kernels::rmsnorm_backward(g_gpu, dinp.tensor(), dweight.tensor(), dout.tensor(), inp,
                                                       w.tensor(), rstd.tensor(), copy);
                           });
  const int B = 2, T = sized(33, 1024), Q = 8, KV = 2, hs = 16, width = (Q + 2 * KV) * hs;
  std::vector<int32_t> at(T);
  for (int t = 0; t < T; ++t) at[t] = 3 * t + 1;  // positions as context parallelism's chunks give them
  Tokens positions(at);
  Floats qkv(random_floats(B * T * width, 95));
  for (bool inverse : {false, true}) {
    kernels::rope(g_cpu, qkv.on_cpu({B, T, width}), positions.host_tensor(), Q, KV, kRopeScaled, inverse);
    kernels::rope(g_gpu, qkv.on_gpu({B, T, width}), positions.tensor(), Q, KV, kRopeScaled, inverse);
    // Angles of libm's cosf/sinf and powf against CUDA's (a couple of ulps each): an ulp of a
    // frequency is an angle pos·ulp apart, 3.6e-5 at GPT-2's positions up to 3,070 — room kept there.
    r.add(qkv, Tolerance{1e-4, T > 64 ? 5e-4 : 1e-4}, inverse ? "rope inverse" : "rope");
  }
  // The inverse rotation with backward's 16-bit copy (the qkv GEMM's dy, v's columns too): the
  // GPU's own rotation, and the copy it rounded.
  for (const DType type : {DType::bf16, DType::fp16}) {
    Floats alone(qkv.host), beside(qkv.host);
    Halves copy(qkv.host.size(), 0xFFFF);
    kernels::rope(g_gpu, alone.on_gpu({B, T, width}), positions.tensor(), Q, KV, kRopeScaled, true);
    kernels::rope(g_gpu, beside.on_gpu({B, T, width}), positions.tensor(), Q, KV, kRopeScaled, true,
                  copy.on_gpu({B, T, width}, type));
    const std::vector<float> values = alone.from_gpu();
    r.add(compare(beside.from_gpu(), values, kExact, std::string("rope inverse beside its ") + dtype_name(type) + " copy"));
    std::vector<low16> rounded(values.size());
    kernels::convert(g_cpu, view(rounded.data(), type, rounded.size()), view(const_cast<float*>(values.data()), values.size()));
    r.add(compare_bits(copy.from_gpu(type), rounded, std::string("rope's ") + dtype_name(type) + " copy"));
  }
  // expand_kv and reduce_kv copy and add in one order: from the same q, k, v on both sides (the
  // rotations above left each side's own last bits: libm's cosf/sinf are not CUDA's).
  kernels::upload(g_gpu, qkv.tensor(), qkv.cpu());
  Floats full(B * T * 3 * Q * hs), compact(B * T * width);
  kernels::expand_kv(g_cpu, full.on_cpu({B * T, 3 * Q * hs}), qkv.on_cpu({B * T, width}), Q, KV);
  kernels::expand_kv(g_gpu, full.on_gpu({B * T, 3 * Q * hs}), qkv.on_gpu({B * T, width}), Q, KV);
  r.add(full, kExact, "expand_kv");
  kernels::reduce_kv(g_cpu, compact.on_cpu({B * T, width}), full.on_cpu({B * T, 3 * Q * hs}), Q, KV);
  kernels::reduce_kv(g_gpu, compact.on_gpu({B * T, width}), full.on_gpu({B * T, 3 * Q * hs}), Q, KV);
  r.add(compact, kExact, "reduce_kv");
  const int F = sized(100, 14336);
  Floats gate_up(random_floats(N * 2 * F, 96, 2.0f)), h(N * F), dh(random_floats(N * F, 97)), dgu(N * 2 * F);
  kernels::swiglu_forward(g_cpu, h.on_cpu({N, F}), gate_up.on_cpu({N, 2 * F}));
  kernels::swiglu_forward(g_gpu, h.on_gpu({N, F}), gate_up.on_gpu({N, 2 * F}));
  r.add(h, kF32, "swiglu forward");
  kernels::swiglu_backward(g_cpu, dgu.on_cpu({N, 2 * F}), gate_up.on_cpu({N, 2 * F}), dh.on_cpu({N, F}));
  kernels::swiglu_backward(g_gpu, dgu.on_gpu({N, 2 * F}), gate_up.on_gpu({N, 2 * F}), dh.on_gpu({N, F}));
  r.add(dgu, kF32, "swiglu backward");
}

void residuals(Report& r) {
  const int M = sized(33, 2048), N = sized(129, 768);
  Floats a(random_floats(M * N, 70)), b(random_floats(M * N, 71)), bias(random_floats(N, 72)), out(M * N);
  kernels::residual_forward(g_cpu, out.host_tensor(), a.host_tensor(), b.host_tensor());
  kernels::residual_forward(g_gpu, out.tensor(), a.tensor(), b.tensor());
  r.add(out, kExact, "residual_forward");
  kernels::bias_residual_forward(g_cpu, out.host_tensor(), a.host_tensor(), b.on_cpu({M, N}), bias.host_tensor());
  kernels::bias_residual_forward(g_gpu, out.tensor(), a.tensor(), b.on_gpu({M, N}), bias.tensor());
  r.add(out, kExact, "bias_residual_forward");
  // With the kept 16-bit copy written in the same pass: the sums (exact on both) rounded alike.
  for (const DType type : {DType::bf16, DType::fp16}) {
    Halves kept(M * N);
    kernels::bias_residual_forward(g_cpu, out.host_tensor(), a.host_tensor(), b.on_cpu({M, N}), bias.host_tensor(),
                                   kept.host_tensor(type));
    kernels::bias_residual_forward(g_gpu, out.tensor(), a.tensor(), b.on_gpu({M, N}), bias.tensor(), kept.tensor(type));
    r.add(out, kExact, std::string("bias_residual_forward keeping ") + dtype_name(type));
    r.add(compare_bits(kept.from_gpu(type), kept.host, std::string("bias_residual_forward's ") + dtype_name(type)));
    kernels::residual_forward(g_cpu, out.host_tensor(), a.host_tensor(), b.host_tensor(), kept.host_tensor(type));
    kernels::residual_forward(g_gpu, out.tensor(), a.tensor(), b.tensor(), kept.tensor(type));
    r.add(out, kExact, std::string("residual_forward keeping ") + dtype_name(type));
    r.add(compare_bits(kept.from_gpu(type), kept.host, std::string("residual_forward's ") + dtype_name(type)));
  }
  kernels::add_inplace(g_cpu, a.host_tensor(), b.host_tensor());
  kernels::add_inplace(g_gpu, a.tensor(), b.tensor());
  r.add(a, kExact, "add_inplace");
}

void attention(Report& r, bool bf16_path) {
  const int B = 2, T = sized(48, 1024), C = sized(96, 768), NH = sized(4, 12);
  const size_t n_qkv = size_t(B) * T * 3 * C, n_out = size_t(B) * T * C, n_att = size_t(B) * NH * T * T;
  Floats qkv(random_floats(n_qkv, 80)), out(n_out), att(n_att), dout(random_floats(n_out, 81)), dqkv(n_qkv, 5.0f),
      datt(n_att);
  Halves qkv16(n_qkv), att16(n_att), dout16(n_out);
  const std::string t = bf16_path ? "bf16 " : "f32 ";
  kernels::prepare_attention(g_gpu, bf16_path ? Precision::bf16 : Precision::fp32, B, T, C, NH);
  const Shape sequence{B, T, 3 * C};
  if (!bf16_path) {
    kernels::attention_forward(g_cpu, out.host_tensor(), att.host_tensor(), qkv.on_cpu(sequence), NH);
    kernels::attention_forward(g_gpu, out.tensor(), att.tensor(), qkv.on_gpu(sequence), NH);
  } else {
    kernels::convert(g_cpu, qkv16.host_tensor(DType::bf16), qkv.host_tensor());
    kernels::upload(g_gpu, qkv16.tensor(DType::bf16), qkv16.cpu());
    kernels::attention_forward_bf16(g_cpu, out.host_tensor(), att.host_tensor(), att16.host_tensor(),
                                    qkv16.on_cpu(sequence), NH);
    kernels::attention_forward_bf16(g_gpu, out.tensor(), att.tensor(), att16.tensor(), qkv16.on_gpu(sequence), NH);
  }
  const Tolerance tol = bf16_path ? kBf16 : kGemm;
  r.add(att, tol, t + "attention probabilities");
  r.add(out, tol, t + "attention out");
  // Backward from the CPU's probabilities on both, so that only backward is compared.
  kernels::upload(g_gpu, att.tensor(), att.cpu());
  if (!bf16_path) {
    kernels::attention_backward(g_cpu, dqkv.host_tensor(), datt.host_tensor(), dout.host_tensor(), qkv.on_cpu(sequence),
                                att.host_tensor(), NH);
    kernels::attention_backward(g_gpu, dqkv.tensor(), datt.tensor(), dout.tensor(), qkv.on_gpu(sequence), att.tensor(),
                                NH);
  } else {
    kernels::upload(g_gpu, att16.tensor(DType::bf16), att16.cpu());
    kernels::attention_backward_bf16(g_cpu, dqkv.host_tensor(), datt.host_tensor(), dout.host_tensor(),
                                     dout16.host_tensor(), qkv16.on_cpu(sequence), att.host_tensor(),
                                     att16.host_tensor(), NH);
    kernels::attention_backward_bf16(g_gpu, dqkv.tensor(), datt.tensor(), dout.tensor(), dout16.tensor(),
                                     qkv16.on_gpu(sequence), att.tensor(), att16.tensor(), NH);
  }
  r.add(dqkv, tol, t + "attention dqkv");
}

// One size of the memory-efficient attention on both backends (gpu: its context), NH query heads
// over KV key/value heads, from qkv and dout of seeds seed and seed + 1. type f32: f32 q, k, v and
// y; else q, k, v rounded to the 16-bit type and read as such, y written in it (a 16-bit model's
// kept values, as the model passes them). out and dqkv held to `tol`, the log-sum-exps to the
// GEMM tolerance; backward from the CPU's forward results on both. label names the lines.
void flash_attention_size(Report& r, Context& gpu, int T, int C, int NH, int KV, unsigned seed, DType type,
                          Tolerance tol, const std::string& label) {
  const int B = 2;
  tol = for_heads(tol, C / NH);
  const int64_t W = C + 2 * int64_t(KV) * (C / NH);  // (NH + 2·KV)·hs
  const size_t n_qkv = size_t(B) * T * W, n_out = size_t(B) * T * C, n_lse = size_t(B) * NH * T;
  Floats qkv(random_floats(n_qkv, seed)), out(n_out), lse(n_lse), dout(random_floats(n_out, seed + 1)),
      dqkv(n_qkv, 5.0f);
  Halves qkv16(n_qkv), out16(n_out);
  const bool low = type != DType::f32;
  if (low) {
    kernels::convert(g_cpu, qkv16.host_tensor(type), qkv.host_tensor());
    kernels::upload(g_gpu, qkv16.tensor(type), qkv16.cpu());
  }
  const Shape sequence{B, T, W}, rows{B, T, C};
  const Tensor q_cpu = low ? qkv16.on_cpu(sequence, type) : qkv.on_cpu(sequence);
  const Tensor q_gpu = low ? qkv16.on_gpu(sequence, type) : qkv.on_gpu(sequence);
  const Tensor y_cpu = low ? out16.on_cpu(rows, type) : out.on_cpu(rows);
  const Tensor y_gpu = low ? out16.on_gpu(rows, type) : out.on_gpu(rows);
  const std::string at = " (T " + std::to_string(T) + ", hs " + std::to_string(C / NH) +
                         (KV != NH ? ", " + std::to_string(NH) + " heads over " + std::to_string(KV) : std::string()) +
                         ")";
  kernels::flash_attention_forward(g_cpu, y_cpu, lse.host_tensor(), q_cpu, NH, KV);
  kernels::flash_attention_forward(gpu, y_gpu, lse.tensor(), q_gpu, NH, KV);
  r.add(compare_typed(out, out16, type, tol, label + " out" + at));
  r.add(lse, kGemm, label + " log-sum-exp" + at);
  if (low) kernels::upload(g_gpu, out16.tensor(type), out16.cpu());
  else kernels::upload(g_gpu, out.tensor(), out.cpu());
  kernels::upload(g_gpu, lse.tensor(), lse.cpu());
  kernels::flash_attention_backward(g_cpu, dqkv.host_tensor(), dout.host_tensor(), q_cpu, y_cpu, lse.host_tensor(), NH,
                                    KV);
  kernels::flash_attention_backward(gpu, dqkv.tensor(), dout.tensor(), q_gpu, y_gpu, lse.tensor(), NH, KV);
  r.add(dqkv, tol, label + " dqkv" + at);
  if (!low) return;
  // The first query sees one key: P = 1 and dS = dP − D = 0, so its dq is 0 — on the GPU to the
  // sums' rounding, where D is summed from dy as dP's product sees it (rounded to the operand
  // type); from dy's f32 values it was dy's rounding times v, 1e-2 of dqkv's rms at these sizes
  // (the emulator: 3e-6 with, 1.3e-2 without).
  {
    const std::vector<float> gpu_dq = dqkv.from_gpu();
    double squares = 0.0, first = 0.0;
    for (float x : dqkv.host) squares += double(x) * x;
    for (int b = 0; b < B; ++b)
      for (int c = 0; c < C; ++c) first = std::max(first, std::fabs(double(gpu_dq[size_t(b) * T * W + c])));
    const double share = first / (1e-4 * std::sqrt(squares / dqkv.host.size()));
    r.add(Verdict{share, label + " first query's dq" + at + ": " + std::to_string(first) + " (" + std::to_string(share) +
                             " of 1e-4 of dqkv's rms)"});
  }
  // dqkv's 16-bit copy written beside it (what the qkv GEMM's backward reads): the same dqkv, and
  // the copy is it rounded, bit for bit.
  const std::vector<float> values = dqkv.from_gpu();
  Floats again(n_qkv, 5.0f);
  Halves copy(n_qkv, 0xFFFF);
  kernels::flash_attention_backward(gpu, again.tensor().reshaped(sequence), dout.tensor(), q_gpu, y_gpu, lse.tensor(), NH,
                                    KV, copy.on_gpu(sequence, type));
  r.add(compare(again.from_gpu(), values, kExact, label + " dqkv beside its copy" + at));
  std::vector<low16> rounded(n_qkv);
  kernels::convert(g_cpu, view(rounded.data(), type, n_qkv), view(values.data(), n_qkv));
  r.add(compare_bits(copy.from_gpu(type), rounded, label + " dqkv's copy" + at));
}

// The memory-efficient attention on the device against the CPU's, at sizes that cross the CPU's
// tiles (T not a multiple of 64) and heads of 24, 32 and 64 channels; grouped-query attention's
// heads (NH over KV) read as they are.
void flash_attention(Report& r) {
  for (const auto& [T, C, NH, KV] :
       {std::tuple<int, int, int, int>{sized(70, 1024), sized(96, 768), sized(4, 12), sized(4, 12)},
        std::tuple<int, int, int, int>{37, 128, 2, 2}, std::tuple<int, int, int, int>{37, 128, 4, 2},
        std::tuple<int, int, int, int>{70, 128, 4, 1}})
    flash_attention_size(r, g_gpu, T, C, NH, KV, 83, DType::f32, kGemm, "flash attention");
  // A 16-bit model's kept values with f32 products (cuda.attention_products = f32): the warp
  // kernels read the bf16 and fp16 values and write y in their type (a 16-bit rounding apart).
  for (const DType type : {DType::bf16, DType::fp16})
    for (const auto& [C, NH, KV] : {std::tuple<int, int, int>{128, 2, 2}, std::tuple<int, int, int>{96, 4, 4},
                                    std::tuple<int, int, int>{96, 4, 2}})  // heads of 64 and 24
      flash_attention_size(r, g_gpu, 37, C, NH, KV, 84, type, kBf16,
                           std::string("flash attention on ") + dtype_name(type));
}

// The 16-bit attention's sizes (T, C, NH, KV): GPT-2 124M's (or a small one), heads of 32, 64 and
// 128 channels, T across the 64-row tiles (70, 130), below one tile (37) and `shortest` (cuDNN
// refuses 1); grouped-query attention at Llama 3 8B's heads (32 over 8 of 128 channels, or 4 over
// 1) and 4 over 2 heads of 64.
std::vector<std::tuple<int, int, int, int>> attention_16bit_sizes(int shortest) {
  return {{sized(70, 1024), sized(128, 768), sized(2, 12), sized(2, 12)},
          {37, 256, 2, 2},
          {130, 256, 2, 2},
          {130, 64, 2, 2},
          {shortest, 128, 2, 2},
          {sized(70, 1024), sized(512, 4096), sized(4, 32), sized(1, 8)},
          {130, 256, 4, 2}};
}

// The tensor-core kernels of 16-bit models (ctx.attention_operands bf16 or fp16, q, k and v read
// in that type as kept, y written in it) against the CPU's f32 products on the same 16-bit values: they differ by the
// rounding of dy, P and dS to the operand type, hence kAttention16 for out and dqkv; the
// log-sum-exps involve no such rounding (products of 16-bit values are exact in f32), so they
// are held to the GEMM tolerance. Heads of 32, 64 and 128 channels, T across the 64-row tiles
// (70, 130), below one tile (37) and 1; then ring attention's blocks of two tiles each: a causal
// first block and an unmasked earlier one folded in, and both backward added up.
void flash_attention_16bit(Report& r, Precision operands) {
  Context gpu16 = g_gpu;
  gpu16.attention_operands = operands;
  gpu16.library_attention = false;  // ours (cuda.attention_kernel = own): flash_attention_cudnn_* checks cuDNN's
  const DType type = operands == Precision::fp16 ? DType::fp16 : DType::bf16;
  const std::string kind = operands == Precision::fp16 ? "fp16" : "bf16";
  for (const auto& [T, C, NH, KV] : attention_16bit_sizes(1))
    flash_attention_size(r, gpu16, T, C, NH, KV, 85, type, kAttention16, "tensor-core flash attention " + kind);
  // Two chunks of 100 rows (two tiles each, the second partial), heads of 128 channels, multi-head
  // and one key/value head for two: chunk 1's queries against its own keys (causal, first), then
  // against chunk 0's, the keys and values packed out of the 16-bit qkv into a (B, T, 2·KV·hs)
  // buffer (copy_columns of 16-bit values) as the ring sends them; dk and dv into an f32
  // accumulator of that layout as the ring's.
  for (const int KV : {2, 1}) {
    const int B = 2, rows = 100, T = 2 * rows, C = 256, NH = 2, Wkv = 2 * KV * (C / NH), W = C + Wkv;
    const size_t n_qkv = size_t(B) * T * W, n_out = size_t(B) * T * C, n_lse = size_t(B) * NH * T;
    Floats qkv(random_floats(n_qkv, 87)), out(n_out), lse(n_lse), dout(random_floats(n_out, 88)), dqkv(n_qkv, 0.0f),
        dkv(size_t(B) * T * Wkv, 0.0f);
    Halves qkv16(n_qkv), kv16(size_t(B) * T * Wkv);  // the values as kept, and as the ring's (k, v) blocks travel
    kernels::convert(g_cpu, qkv16.host_tensor(type), qkv.host_tensor());
    kernels::upload(g_gpu, qkv16.tensor(type), qkv16.cpu());
    const Shape sequence{B, T, W}, packed{B, T, Wkv}, y{B, T, C};
    const Tensor q_cpu = qkv16.on_cpu(sequence, type), q_gpu = qkv16.on_gpu(sequence, type);
    const Tensor kv_cpu = kv16.on_cpu(packed, type), kv_gpu = kv16.on_gpu(packed, type);
    const std::string heads = KV == NH ? "" : ", 2 heads over 1";
    kernels::copy_columns(g_cpu, kv_cpu, 0, q_cpu, C, Wkv, false);
    kernels::copy_columns(g_gpu, kv_gpu, 0, q_gpu, C, Wkv, false);
    r.add(compare_bits(kv16.from_gpu(type), kv16.host, "copy_columns of 16-bit values " + kind + heads));
    const kernels::AttentionBlock own{1, 1, rows, true, true}, earlier{1, 0, rows, false, false};
    for (const kernels::AttentionBlock& block : {own, earlier}) {
      kernels::flash_attention_block_forward(g_cpu, out.on_cpu(y), lse.host_tensor(), q_cpu, kv_cpu, NH, KV, block);
      kernels::flash_attention_block_forward(gpu16, out.on_gpu(y), lse.tensor(), q_gpu, kv_gpu, NH, KV, block);
    }
    const Tolerance head_tol = for_heads(kAttention16, C / NH);
    r.add(out, head_tol, "tensor-core ring blocks out " + kind + heads);
    r.add(lse, kGemm, "tensor-core ring blocks log-sum-exp " + kind + heads);
    kernels::upload(g_gpu, out.tensor(), out.cpu());
    kernels::upload(g_gpu, lse.tensor(), lse.cpu());
    for (const kernels::AttentionBlock& block : {own, earlier}) {
      kernels::flash_attention_block_backward(g_cpu, dqkv.on_cpu(sequence), dkv.on_cpu(packed), dout.host_tensor(),
                                              q_cpu, kv_cpu, out.on_cpu(y), lse.host_tensor(), NH, KV, block);
      kernels::flash_attention_block_backward(gpu16, dqkv.on_gpu(sequence), dkv.on_gpu(packed), dout.tensor(), q_gpu,
                                              kv_gpu, out.on_gpu(y), lse.tensor(), NH, KV, block);
    }
    // dq: chunk 1's q columns alone are written (the rest stays 0 on both sides, in neither norm).
    r.add(dqkv, head_tol, "tensor-core ring blocks dq " + kind + heads);
    r.add(dkv, head_tol, "tensor-core ring blocks dk, dv " + kind + heads);
  }
}

// cuDNN's fused attention (cuda.attention_kernel = auto, the default), where this build has it,
// against the CPU's f32 products on the same 16-bit values, at the tensor-core kernels' sizes
// (whole sequences only: ring blocks run on ours; T = 2, as cuDNN refuses T = 1, which runs on
// ours) — FlashAttention's arithmetic too, so the same tolerances. First that cuDNN takes each
// size: a size it declines (its reason on stderr) runs on our kernels in training, as here, so it
// is compared no further and named on stderr; cuDNN taking none of them (not loadable, or no
// graph for any size) fails.
// The GPU's context with cuDNN's fused attention on (cuda.attention_kernel = auto) for 16-bit
// `operands`.
Context cudnn_context(Precision operands) {
  Context fused = g_gpu;
  fused.attention_operands = operands;
  fused.library_attention = true;
  return fused;
}

void flash_attention_cudnn(Report& r, Precision operands) {
  if (!kernels::cuda::cudnn_attention_built_in()) {
    r.skipped = "this build has no cuDNN: " + kernels::cuda::cudnn_attention_build();
    return;
  }
  Context fused = cudnn_context(operands);
  const DType type = operands == Precision::fp16 ? DType::fp16 : DType::bf16;
  const std::string kind = operands == Precision::fp16 ? "fp16" : "bf16", build = kernels::cuda::cudnn_attention_build();
  std::string declined;
  int taken = 0;
  for (const auto& [T, C, NH, KV] : attention_16bit_sizes(2)) {
    const std::string at = " (T " + std::to_string(T) + ", hs " + std::to_string(C / NH) + ", " + std::to_string(NH) +
                           " heads over " + std::to_string(KV) + ")";
    const kernels::cuda::FusedAttention sizes{nullptr, 2, T, NH, KV, C / NH, operands, 1.0f};
    if (!kernels::cuda::cudnn_attention_takes(fused, sizes)) {
      declined += (declined.empty() ? "" : ", ") + at.substr(1);
      continue;
    }
    flash_attention_size(r, fused, T, C, NH, KV, 85, type, kAttention16, "cuDNN flash attention " + kind);
    ++taken;
  }
  if (!declined.empty())
    std::fprintf(stderr, "cuDNN's attention %s declined %s: our kernels run those (%s)\n", kind.c_str(),
                 declined.c_str(), build.c_str());
  if (taken == 0) r.add({2.0, "cuDNN's attention " + kind + " took none of the sizes (" + build + "; why on stderr)"});
}

void decode(Report& r) {
  const int positions = 37, C = 96, NH = 4;
  for (int KV : {4, 2, 1}) {  // multi-head, grouped, multi-query: the cache holds KV heads
    const int W = KV * (C / NH);
    Floats q(random_floats(C, 90)), keys(random_floats(positions * W, 91)), values(random_floats(positions * W, 92)),
        out(C), scores(NH * positions);
    kernels::attention_decode(g_cpu, out.host_tensor(), scores.host_tensor(), q.host_tensor(),
                              keys.on_cpu({positions, W}), values.host_tensor(), NH);
    kernels::attention_decode(g_gpu, out.tensor(), scores.tensor(), q.tensor(), keys.on_gpu({positions, W}),
                              values.tensor(), NH);
    r.add(out, kF32, "attention_decode, " + std::to_string(KV) + " key/value heads");
  }
}

void embeddings(Report& r) {
  const int B = 3, T = 17, C = 40, V = 50, begin = 10, rows = 25;  // a vocabulary slice
  Tokens tokens(random_tokens(B * T, V, 100));
  Floats wte(random_floats(rows * C, 101)), wpe(random_floats(T * C, 102)), out(B * T * C, 3.0f);
  kernels::embedding_forward(g_cpu, out.host_tensor(), tokens.on_cpu({B, T}), wte.on_cpu({rows, C}), begin);
  kernels::embedding_forward(g_gpu, out.tensor(), tokens.on_gpu({B, T}), wte.on_gpu({rows, C}), begin);
  r.add(out, kExact, "embedding_forward");
  for (DType type : {DType::bf16, DType::fp16}) {  // a 16-bit model's table, widened as it is read
    Halves low(static_cast<size_t>(rows) * C);
    kernels::convert(g_cpu, low.host_tensor(type), wte.host_tensor());
    kernels::convert(g_gpu, low.tensor(type), wte.tensor());
    kernels::embedding_forward(g_cpu, out.host_tensor(), tokens.on_cpu({B, T}), low.on_cpu({rows, C}, type), begin);
    kernels::embedding_forward(g_gpu, out.tensor(), tokens.on_gpu({B, T}), low.on_gpu({rows, C}, type), begin);
    r.add(out, kExact, std::string("embedding_forward of a ") + dtype_name(type) + " table");
  }
  kernels::positions_forward(g_cpu, out.on_cpu({B, T, C}), wpe.host_tensor());
  kernels::positions_forward(g_gpu, out.on_gpu({B, T, C}), wpe.tensor());
  r.add(out, kExact, "positions_forward (+=)");
  Floats dout(random_floats(B * T * C, 103)), dwte(random_floats(rows * C, 104)), dwpe(random_floats(T * C, 105));
  kernels::embedding_backward(g_cpu, dwte.on_cpu({rows, C}), dout.host_tensor(), tokens.on_cpu({B, T}), begin);
  kernels::embedding_backward(g_gpu, dwte.on_gpu({rows, C}), dout.tensor(), tokens.on_gpu({B, T}), begin);
  r.add(dwte, kExact, "embedding_backward (+=, positions in order)");
  kernels::positions_backward(g_cpu, dwpe.host_tensor(), dout.on_cpu({B, T, C}));
  kernels::positions_backward(g_gpu, dwpe.tensor(), dout.on_gpu({B, T, C}));
  r.add(dwpe, kExact, "positions_backward (+=, batches in order)");
}

void crossentropy(Report& r) {
  // Small: a vocabulary slice with padding columns; GPT-2: the whole padded vocabulary.
  const int N = sized(29, 2048), valid = sized(1000, 50257), ld = sized(1024, 50304), begin = sized(500, 0);
  Floats logits(random_floats(size_t(N) * ld, 110, 3.0f)), maxes(N), sums(N), targets_logit(N), losses(N), norms(N),
      dlogits(size_t(N) * ld, 9.0f);
  Tokens targets(random_tokens(N, sized(2000, 50257), 111));
  const Tensor rows_cpu = logits.on_cpu({N, ld}), rows_gpu = logits.on_gpu({N, ld});
  kernels::crossentropy_row_max(g_cpu, maxes.host_tensor(), rows_cpu, valid);
  kernels::crossentropy_row_max(g_gpu, maxes.tensor(), rows_gpu, valid);
  r.add(maxes, kExact, "crossentropy_row_max");
  kernels::crossentropy_row_sums(g_cpu, sums.host_tensor(), targets_logit.host_tensor(), rows_cpu, maxes.host_tensor(),
                                 targets.host_tensor(), begin, valid);
  kernels::crossentropy_row_sums(g_gpu, sums.tensor(), targets_logit.tensor(), rows_gpu, maxes.tensor(),
                                 targets.tensor(), begin, valid);
  r.add(sums, kF32, "crossentropy_row_sums (sums)");
  r.add(targets_logit, kExact, "crossentropy_row_sums (target logits)");
  kernels::upload(g_gpu, sums.tensor(), sums.cpu());  // the pieces after it from the same inputs
  kernels::crossentropy_losses(g_cpu, losses.host_tensor(), norms.host_tensor(), maxes.host_tensor(),
                               sums.host_tensor(), targets_logit.host_tensor());
  kernels::crossentropy_losses(g_gpu, losses.tensor(), norms.tensor(), maxes.tensor(), sums.tensor(),
                               targets_logit.tensor());
  r.add(losses, kF32, "crossentropy_losses");
  r.add(norms, kF32, "crossentropy_losses (log normalizers)");
  kernels::upload(g_gpu, norms.tensor(), norms.cpu());
  kernels::crossentropy_backward(g_cpu, dlogits.host_tensor(), rows_cpu, norms.host_tensor(), targets.host_tensor(),
                                 begin, 0.01f, valid);
  kernels::crossentropy_backward(g_gpu, dlogits.tensor(), rows_gpu, norms.tensor(), targets.tensor(), begin, 0.01f,
                                 valid);
  r.add(dlogits, kF32, "crossentropy_backward");
  // dlogits in 16 bits (a 16-bit model's chunked classifier): the GPU's own f32 dlogits rounded.
  add_low16_outputs(r, dlogits, "crossentropy_backward dlogits", [&](const Tensor& out) {
    kernels::crossentropy_backward(g_gpu, out.reshaped(rows_gpu.shape), rows_gpu, norms.tensor(), targets.tensor(), begin,
                                   0.01f, valid);
  });
  kernels::crossentropy_backward(g_cpu, rows_cpu, rows_cpu, norms.host_tensor(), targets.host_tensor(), begin, 0.01f,
                                 valid);
  kernels::crossentropy_backward(g_gpu, rows_gpu, rows_gpu, norms.tensor(), targets.tensor(), begin, 0.01f, valid);
  r.add(logits, kF32, "crossentropy_backward in place");
}

// The loss and its gradient in one operation, over rows of the whole vocabulary: on the GPU the
// pieces' values bit for bit (one kernel whose row fits in shared memory: GPT-2's 50,257 on an
// H100/H200; a row of 70,000 does not fit anywhere and takes the pieces), and against the CPU's
// one operation at f32's tolerance; dlogits in f32 (in place) and in 16 bits. First a row of
// exactly 48 KB (a vocabulary of 12,288): it needs the shared-memory opt-in, since the kernel's
// reductions add static bytes to it.
void crossentropy_fused(Report& r) {
  for (const int valid : {12288, sized(1000, 50257), 70000}) {
    const int N = valid > 60000 ? 3 : sized(29, 2048), ld = (valid + 127) / 128 * 128;
    const Shape rows{N, ld};
    Floats logits(random_floats(size_t(N) * ld, 112, 3.0f)), maxes(N), sums(N), target_logits(N), losses(N), norms(N),
        fused_losses(N), fused_norms(N), dlogits(size_t(N) * ld);
    Tokens targets(random_tokens(N, valid, 113));
    const std::string size = " (" + std::to_string(N) + " rows of " + std::to_string(valid) + ")";
    // The GPU's pieces, into the twins' host side: what the one kernel must equal bit for bit.
    kernels::crossentropy_row_max(g_gpu, maxes.tensor(), logits.on_gpu(rows), valid);
    kernels::crossentropy_row_sums(g_gpu, sums.tensor(), target_logits.tensor(), logits.on_gpu(rows), maxes.tensor(),
                                   targets.tensor(), 0, valid);
    kernels::crossentropy_losses(g_gpu, losses.tensor(), norms.tensor(), maxes.tensor(), sums.tensor(),
                                 target_logits.tensor());
    kernels::crossentropy_backward(g_gpu, dlogits.tensor(), logits.on_gpu(rows), norms.tensor(), targets.tensor(), 0,
                                   0.01f, valid);
    const std::vector<float> pieces_losses = losses.from_gpu(), pieces_norms = norms.from_gpu(),
                             pieces_dlogits = dlogits.from_gpu();
    Floats in_place(logits.host);  // dlogits in place of the logits, as the f32 classifier runs it
    kernels::crossentropy_forward_backward(g_gpu, fused_losses.tensor(), fused_norms.tensor(), in_place.tensor(),
                                           in_place.on_gpu(rows), targets.tensor(), 0.01f, valid);
    r.add(compare(fused_losses.from_gpu(), pieces_losses, kExact, "losses against the GPU's pieces" + size));
    r.add(compare(fused_norms.from_gpu(), pieces_norms, kExact, "log-normalizers against the GPU's pieces" + size));
    r.add(compare(in_place.from_gpu(), pieces_dlogits, kExact, "dlogits in place against the GPU's pieces" + size));
    kernels::crossentropy_forward_backward(g_cpu, fused_losses.host_tensor(), fused_norms.host_tensor(),
                                           in_place.host_tensor(), in_place.on_cpu(rows), targets.host_tensor(), 0.01f,
                                           valid);
    r.add(fused_losses, summed_over(valid), "losses against the CPU" + size);
    r.add(fused_norms, summed_over(valid), "log-normalizers against the CPU" + size);
    r.add(in_place, summed_over(valid), "dlogits against the CPU" + size);
    for (DType type : {DType::bf16, DType::fp16}) {
      Halves low(size_t(N) * ld), expected(size_t(N) * ld);
      kernels::crossentropy_backward(g_gpu, expected.on_gpu(rows, type), logits.on_gpu(rows), norms.tensor(),
                                     targets.tensor(), 0, 0.01f, valid);
      kernels::crossentropy_forward_backward(g_gpu, fused_losses.tensor(), fused_norms.tensor(), low.on_gpu(rows, type),
                                             logits.on_gpu(rows), targets.tensor(), 0.01f, valid);
      r.add(compare_bits(low.from_gpu(type), expected.from_gpu(type),
                         std::string("dlogits in ") + dtype_name(type) + " against the GPU's pieces" + size));
    }
  }
}

void optimizer(Report& r) {
  const size_t n = 100001;
  std::vector<float> v0 = random_floats(n, 123, 0.01f);
  for (float& x : v0) x = std::fabs(x);
  Floats params(random_floats(n, 120)), grads(random_floats(n, 121)), m(random_floats(n, 122, 0.01f)), v(v0);
  // Three segments in one launch, the middle one without weight decay, an empty one between: the
  // launch's flat index finds each element's segment.
  const std::vector<kernels::AdamWSegment> segments = {
      {0, 1000, true}, {1000, 0, true}, {1000, 77, false}, {1077, int64_t(n) - 1077, true}};
  kernels::adamw_update(g_cpu, params.host_tensor(), Tensor{}, grads.host_tensor(), m.host_tensor(), v.host_tensor(),
                        segments, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 5, 0.7f);
  kernels::adamw_update(g_gpu, params.tensor(), Tensor{}, grads.tensor(), m.tensor(), v.tensor(), segments, 3e-4f, 0.9f,
                        0.95f, 1e-8f, 0.1f, 5, 0.7f);
  r.add(params, kF32, "adamw params");
  r.add(m, kF32, "adamw m");
  r.add(v, kF32, "adamw v");
  // The fused 16-bit copy: what convert makes of the updated parameters on the GPU, bit for bit.
  for (DType type : {DType::bf16, DType::fp16}) {
    Halves fused(n), converted(n);
    kernels::adamw_update(g_gpu, params.tensor(), fused.tensor(type), grads.tensor(), m.tensor(), v.tensor(), segments,
                          3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 6, 0.7f);
    kernels::convert(g_gpu, converted.tensor(type), params.tensor());
    r.add(compare_bits(fused.from_gpu(type), converted.from_gpu(type), std::string("adamw copy ") + dtype_name(type)));
  }
  // Three parts (one empty, one within a chunk) in one launch, each against the CPU's.
  const Parts parts = parts_at(grads, {0, 777, 777, n});
  const std::vector<double> cpu = kernels::sums_of_squares(g_cpu, parts.cpu);
  const std::vector<double> gpu = kernels::sums_of_squares(g_gpu, parts.gpu);
  for (size_t i = 0; i < cpu.size(); ++i)
    r.add({std::fabs(gpu[i] - cpu[i]) / (1e-12 * cpu[i] + 1e-300),
           "sums_of_squares part " + std::to_string(i) + ": " + std::to_string(gpu[i]) + " vs " + std::to_string(cpu[i])});
}

// A step's decisions on the device (issue 30, item 4): the grouped sums of squares, the loss of
// the micro-batches' sums and step_control's scalars as the CPU makes them, and AdamW reading
// its factor and skip flag from device memory.
void step_on_device(Report& r) {
  const size_t n = 50001;
  Floats grads(random_floats(n, 140));
  const std::vector<int> group = {1, 0, 1};
  const Parts parts = parts_at(grads, {0, 777, 777, n});
  Twin<double> scalars(std::vector<double>(kernels::kStepScalars, 0.0)), sums(std::vector<double>{812.5, 790.25, 801.0});
  scalars.host[kernels::kLossSum] = 0;
  kernels::sums_of_squares_into(g_cpu, scalars.host_tensor().elements(kernels::kSquaresSplit, 2), parts.cpu, group);
  kernels::sums_of_squares_into(g_gpu, scalars.tensor().elements(kernels::kSquaresSplit, 2), parts.gpu, group);
  kernels::mean_losses_into(g_cpu, scalars.host_tensor().elements(kernels::kLossSum, 1), sums.host_tensor(), 64.0);
  kernels::mean_losses_into(g_gpu, scalars.tensor().elements(kernels::kLossSum, 1), sums.tensor(), 64.0);
  kernels::step_control(g_cpu, scalars.host_tensor(), 0.5f, 2.0, 8.0);
  kernels::step_control(g_gpu, scalars.tensor(), 0.5f, 2.0, 8.0);
  const std::vector<double> gpu = scalars.from_gpu();
  for (int k = 0; k < kernels::kStepScalars; ++k)
    r.add({std::fabs(gpu[k] - scalars.host[k]) / (1e-12 * std::fabs(scalars.host[k]) + 1e-300),
           "step scalar " + std::to_string(k) + ": " + std::to_string(gpu[k]) + " vs " + std::to_string(scalars.host[k])});
  // AdamW with the decided factor, then with a skip: the second leaves everything as it was.
  std::vector<float> v0 = random_floats(n, 143, 0.01f);
  for (float& x : v0) x = std::fabs(x);
  Floats params(random_floats(n, 141)), m(random_floats(n, 142, 0.01f)), v(v0);
  const std::vector<kernels::AdamWSegment> all = {{0, int64_t(n), true}};
  Twin<double> go(std::vector<double>{0.25, 0.0}), skip(std::vector<double>{0.25, 1.0});
  for (Twin<double>* control : {&go, &skip}) {
    kernels::adamw_update(g_cpu, params.host_tensor(), Tensor{}, grads.host_tensor(), m.host_tensor(), v.host_tensor(),
                          all, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 2, 7.0f, control->host_tensor());
    kernels::adamw_update(g_gpu, params.tensor(), Tensor{}, grads.tensor(), m.tensor(), v.tensor(), all, 3e-4f, 0.9f,
                          0.95f, 1e-8f, 0.1f, 2, 7.0f, control->tensor());
  }
  r.add(params, kF32, "adamw params, control on the device");
  r.add(m, kF32, "adamw m, control on the device");
}

// The gradient norm's sums in one launch over several blocks, the last to finish adding the
// groups (kernels/cuda/elementwise.cu): 42 chunks of 8,192 values, 16 threads each, are 3 blocks of
// 256 threads; parts that begin inside a block and inside a chunk, an empty one, three groups in
// another order than the parts'; against the CPU's sums, as the gradient norm's own.
void gradient_norm_blocks(Report& r) {
  const size_t chunk = 8192, n = 41 * chunk + 777;
  Floats grads(random_floats(n, 150));
  const Parts parts = parts_at(grads, {0, 3 * chunk + 5, 3 * chunk + 5, 20 * chunk, n});
  const std::vector<int> group = {2, 0, 1, 2};
  Twin<double> sums(std::vector<double>(3, -1.0));
  kernels::sums_of_squares_into(g_cpu, sums.host_tensor(), parts.cpu, group);
  kernels::sums_of_squares_into(g_gpu, sums.tensor(), parts.gpu, group);
  const std::vector<double> gpu = sums.from_gpu();
  for (size_t g = 0; g < gpu.size(); ++g)
    r.add({std::fabs(gpu[g] - sums.host[g]) / (1e-12 * std::fabs(sums.host[g]) + 1e-300),
           "group " + std::to_string(g) + " of 3: " + std::to_string(gpu[g]) + " vs " + std::to_string(sums.host[g])});
}

// The loss sum left on the device (one block, a fixed tree in double): the CPU's index-order sum
// to double rounding.
void loss_sum(Report& r) {
  Floats values(random_floats(300007, 130));
  Buffer<double> total(1, MemoryCategory::Workspace, gpu_backend(), MemoryKind::device);
  kernels::sum_into(g_gpu, total.view(), values.tensor());
  double gpu = 0;
  kernels::download(g_gpu, &gpu, total.view());
  const double cpu = kernels::sum(g_cpu, values.host_tensor());
  r.add({std::fabs(gpu - cpu) / (1e-12 * std::fabs(cpu) + 1e-12), "sum_into " + std::to_string(gpu) + " vs " +
                                                                      std::to_string(cpu)});
}

// cuda.graphs: a capture records (the buffers unchanged by it), each launch replays the kernels
// with their recorded arguments: two launches accumulate twice, and the loss sum follows.
void graphs(Report& r) {
  kernels::Backend& gpu = gpu_backend();
  const size_t n = 4099;
  Floats x(random_floats(n, 131)), acc(n);
  Buffer<double> total(1, MemoryCategory::Workspace, gpu, MemoryKind::device);
  void* graph = gpu.capture_graph(g_gpu.stream, [&] {
    kernels::add_inplace(g_gpu, acc.tensor(), x.tensor());
    kernels::sum_into(g_gpu, total.view(), acc.tensor());
  });
  r.add(compare(acc.from_gpu(), acc.host, kExact, "accumulator after the capture (nothing run)"));
  for (int launch = 0; launch < 2; ++launch) {
    gpu.launch_graph(graph, g_gpu.stream);
    kernels::add_inplace(g_cpu, acc.host_tensor(), x.host_tensor());
  }
  gpu.destroy_graph(graph);
  r.add(acc, kExact, "accumulator after two launches");
  double replayed = 0;
  kernels::download(g_gpu, &replayed, total.view());
  const double cpu = kernels::sum(g_cpu, acc.host_tensor());
  r.add({std::fabs(replayed - cpu) / (1e-12 * std::fabs(cpu) + 1e-12), "replayed loss sum"});
}

// Marks are events on the stream: the seconds between two enclose the copies enqueued between
// them (positive) and no more than the host saw from before the first to after the second.
void marks(Report& r) {
  kernels::Backend& gpu = gpu_backend();
  const size_t n = size_t{64} << 20;  // 256 MiB of f32: some tens of µs per copy on any GPU
  Buffer<float> a(n, MemoryCategory::Workspace, gpu, MemoryKind::device), b(n, MemoryCategory::Workspace, gpu, MemoryKind::device);
  cudaStreamSynchronize(static_cast<cudaStream_t>(g_gpu.stream.handle));
  const auto host_start = std::chrono::steady_clock::now();
  const kernels::Backend::Mark from = gpu.mark(g_gpu.stream);
  for (int i = 0; i < 8; ++i) kernels::copy(g_gpu, b.view(), a.view());
  const kernels::Backend::Mark to = gpu.mark(g_gpu.stream);
  const double seconds = gpu.seconds_between(from, to);
  const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  const bool ok = seconds > 0 && seconds <= host;
  r.add({ok ? 0.0 : 2.0, "8 copies of 256 MiB: " + std::to_string(1e3 * seconds) + " ms by events, " +
                             std::to_string(1e3 * host) + " ms on the host"});
}

// What the runtime holds beside our tensors once a 16-bit training step's libraries are loaded
// (the CUDA context with the modules loaded, cuBLASLt's and cuDNN's workspaces and plan caches, the
// stream-ordered pools): the device's used memory (total − free) less every byte our buffers hold
// now (host ones too, so the figure errs low). It loads those libraries itself — a GEMM with its
// GELU epilogue, and cuDNN's attention where the build has it — so that the figure is the same in
// a process of its own as after other checks. A figure for the planner's GPU profiles, which
// assume 0.6 GB (inputs/hardware/*.ini, device.reserved_gb): the line says when the measured one
// is larger, and the profiles take it. It fails only past 2 GB, which no runtime of one process
// holds without a leak (ours or a library's).
void runtime_reserved(Report& r) {
  constexpr double kAssumedGb = 0.6, kLeakGb = 2.0;
  Report loading;  // what the loading runs compares too, which is the other checks' to judge
  linear_gelu(loading, DType::bf16);
  Context fused = cudnn_context(Precision::bf16);
  const bool cudnn = kernels::cuda::cudnn_attention_takes(fused, {nullptr, 2, 130, 2, 2, 128, Precision::bf16, 1.0f});
  if (cudnn) flash_attention_size(loading, fused, 130, 256, 2, 2, 85, DType::bf16, kAttention16, "cuDNN, loaded");
  size_t free = 0, total = 0;
  cudaDeviceSynchronize();
  // The stream-ordered scratch the checks freed, which the default pool keeps (the backend sets
  // its release threshold so), is ours, not the runtime's: given back first.
  int device = 0;
  cudaMemPool_t pool = nullptr;
  if (cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
    cudaMemPoolTrimTo(pool, 0);
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return r.add({2.0, "cudaMemGetInfo failed"});
  const double ours = static_cast<double>(memory_usage().device_current);  // not our host buffers
  const double reserved = static_cast<double>(total - free) - ours;
  char text[320];
  std::snprintf(text, sizeof text, "the runtime holds %.3f GB beside our buffers' %.3f GB of %.1f GB, with cuBLASLt%s "
                "loaded (the profiles assume %.1f GB%s)", reserved / 1e9, ours / 1e9, total / 1e9,
                cudnn ? " and cuDNN" : ", without cuDNN (not in this build, or it declined)", kAssumedGb,
                reserved > kAssumedGb * 1e9 ? ": device.reserved_gb should take the measured figure" : "");
  r.add({reserved <= kLeakGb * 1e9 ? 0.0 : 2.0, text});
}

const std::vector<Check>& checks() {
  static const std::vector<Check> all = {
      {"memory", memory_ops},
      {"conversions", conversions},
      {"linear_f32", [](Report& r) { linear(r, DType::f32); }},
      {"linear_bf16", [](Report& r) { linear(r, DType::bf16); }},
      {"linear_fp16", [](Report& r) { linear(r, DType::fp16); }},
      {"linear_gelu_f32", [](Report& r) { linear_gelu(r, DType::f32); }},
      {"linear_gelu_bf16", [](Report& r) { linear_gelu(r, DType::bf16); }},
      {"linear_gelu_fp16", [](Report& r) { linear_gelu(r, DType::fp16); }},
      {"linear_gelu_backward_f32", [](Report& r) { linear_gelu_backward(r, DType::f32); }},
      {"linear_gelu_backward_bf16", [](Report& r) { linear_gelu_backward(r, DType::bf16); }},
      {"linear_gelu_backward_fp16", [](Report& r) { linear_gelu_backward(r, DType::fp16); }},
      {"batched_matmul", [](Report& r) { batched(r, false); }},
      {"batched_matmul_bf16", [](Report& r) { batched(r, true); }},
      {"strided_matmul", [](Report& r) { strided(r, false); }},
      {"strided_matmul_bf16", [](Report& r) { strided(r, true); }},
      {"layernorm", layernorm},
      {"gelu", gelu},
      {"llama_parts", llama_parts},
      {"residuals", residuals},
      {"attention_f32", [](Report& r) { attention(r, false); }},
      {"attention_bf16", [](Report& r) { attention(r, true); }},
      {"flash_attention", flash_attention},
      {"flash_attention_bf16", [](Report& r) { flash_attention_16bit(r, Precision::bf16); }},
      {"flash_attention_fp16", [](Report& r) { flash_attention_16bit(r, Precision::fp16); }},
      {"flash_attention_cudnn_bf16", [](Report& r) { flash_attention_cudnn(r, Precision::bf16); }},
      {"flash_attention_cudnn_fp16", [](Report& r) { flash_attention_cudnn(r, Precision::fp16); }},
      {"attention_decode", decode},
      {"embeddings", embeddings},
      {"crossentropy", crossentropy},
      {"crossentropy_fused", crossentropy_fused},
      {"optimizer", optimizer},
      {"loss_sum", loss_sum},
      {"step_on_device", step_on_device},
      {"gradient_norm_blocks", gradient_norm_blocks},
      {"graphs", graphs},
      {"marks", marks},
      {"runtime_reserved", runtime_reserved},  // last: after the others loaded what they use
  };
  return all;
}

}  // namespace

// gpu_tests [--gpt2] [NAME ...]: the named checks (all when none are named), with --gpt2 at
// GPT-2 124M's sizes where a check has them (its lines named cuda_NAME_124m); gpu_tests --list:
// the names, one a line. scripts/gpu-check.sh runs each in a process of its own, so that a sticky
// CUDA error (an illegal address ends the context) fails one check, not every later one.
int main(int argc, char** argv) {
  std::vector<Check> chosen;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--gpt2") == 0) {
      g_gpt2 = true;
      continue;
    }
    if (std::strcmp(argv[a], "--list") == 0) {
      for (const Check& check : checks()) std::printf("%s\n", check.name);
      return 0;
    }
    bool known = false;
    for (const Check& check : checks())
      if (std::strcmp(argv[a], check.name) == 0) chosen.push_back(check), known = true;
    if (!known) {
      std::fprintf(stderr, "gpu_tests: no check named '%s' (gpu_tests --list)\n", argv[a]);
      return 2;
    }
  }
  if (chosen.empty()) chosen = checks();
  const char* suffix = g_gpt2 ? "_124m" : "";  // the sizes in each line's name
  const std::string why = kernels::backend_unavailable("cuda");
  if (!why.empty()) {
    for (const Check& check : chosen) std::printf("SKIP cuda_%s%s (%s)\n", check.name, suffix, why.c_str());
    return 0;
  }
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::printf("FAIL cuda_stream (cudaStreamCreateWithFlags failed)\n");
    return 1;
  }
  g_cpu.backend = &kernels::cpu_backend();
  g_gpu.backend = &gpu_backend();
  g_gpu.stream = Stream{gpu_backend().device(), stream};
  // A GPU this build has no kernel image for (kernels/cuda/kernel_images.hpp) fails every check
  // with the reason, not with the first launch's error in each.
  if (const std::string unfit = gpu_backend().device_unfit_reason(); !unfit.empty()) {
    for (const Check& check : chosen) std::printf("FAIL cuda_%s%s (%s)\n", check.name, suffix, unfit.c_str());
    return 1;
  }
  int failed = 0;
  for (const Check& check : chosen) {
    Report report;
    std::string error;
    try {
      check.run(report);
      const cudaError_t status = cudaStreamSynchronize(stream);
      if (status != cudaSuccess) error = std::string("CUDA: ") + cudaGetErrorString(status);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (error.empty() && !report.skipped.empty()) {
      std::printf("SKIP cuda_%s%s (%s)\n", check.name, suffix, report.skipped.c_str());
      std::fflush(stdout);
      continue;
    }
    double worst = 0.0;
    std::string detail;
    for (const Verdict& v : report.verdicts)
      if (v.worst >= worst) worst = v.worst, detail = v.detail;
    const bool ok = error.empty() && worst <= 1.0;
    failed += !ok;
    std::printf("%s cuda_%s%s (%zu comparisons; %s)\n", ok ? "PASS" : "FAIL", check.name, suffix, report.verdicts.size(),
                error.empty() ? detail.c_str() : error.c_str());
    if (!ok && error.empty())
      for (const Verdict& v : report.verdicts)
        if (v.worst > 1.0) std::printf("  %s\n", v.detail.c_str());
    std::fflush(stdout);
  }
  return failed ? 1 : 0;
}
