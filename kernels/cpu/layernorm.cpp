// LayerNorm through oneDNN's layer_normalization primitives (4–7× faster than our OpenMP
// version on the model's shapes: docs/PERFORMANCE.md), primitives cached per shape. oneDNN
// overwrites its outputs; the interface accumulates the input and parameter gradients (residual
// stream, micro-batches), so backward writes into a workspace and adds.
#include <map>
#include <string>
#include <unordered_map>
#include <mutex>
#include <utility>

#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/portable.hpp"
#include "kernels/cpu/workspace.hpp"

namespace trident::kernels::cpu {
namespace {

using dnnl::memory;
constexpr float kLayerNormEps = 1e-5f;

struct LayerNormPrimitives {
  memory::desc data, stats, channels;
  dnnl::layer_normalization_forward forward;
  dnnl::layer_normalization_backward backward;
};

LayerNormPrimitives create(int N, int C) {
  LayerNormPrimitives p;
  p.data = memory::desc({N, C}, memory::data_type::f32, memory::format_tag::ab);
  p.stats = memory::desc({N}, memory::data_type::f32, memory::format_tag::a);
  p.channels = memory::desc({C}, memory::data_type::f32, memory::format_tag::a);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const auto forward_pd = dnnl::layer_normalization_forward::primitive_desc(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, p.data,
                                              kLayerNormEps, flags),
      cpu_engine());
  p.forward = dnnl::layer_normalization_forward(forward_pd);
  p.backward = dnnl::layer_normalization_backward(dnnl::layer_normalization_backward::primitive_desc(
      dnnl::layer_normalization_backward::desc(dnnl::prop_kind::backward, p.data, p.data,
                                               kLayerNormEps, flags),
      cpu_engine(), forward_pd));
  return p;
}

const LayerNormPrimitives& primitives(int N, int C) {
  static std::map<std::pair<int, int>, LayerNormPrimitives> cache;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find({N, C});
  if (found != cache.end()) return found->second;
  try {
    return cache.emplace(std::make_pair(N, C), create(N, C)).first->second;
  } catch (const dnnl::error& e) {
    throw onednn_failure("create the f32 layer normalization of (N " + std::to_string(N) + ", C " + std::to_string(C) + ")", e);
  }
}

memory wrap(const memory::desc& desc, const float* data) {
  return memory(desc, cpu_engine(), const_cast<float*>(data));
}

void run(const dnnl::primitive& primitive, const std::unordered_map<int, memory>& args, const char* pass, int N, int C) {
  try {
    primitive.execute(cpu_stream(), args);
    cpu_stream().wait();
  } catch (const dnnl::error& e) {
    throw onednn_failure(std::string("run the f32 layer normalization ") + pass + " of (N " + std::to_string(N) +
                             ", C " + std::to_string(C) + ")", e);
  }
}

// The workspace of oneDNN's overwritten outputs, (N, C) + 2 × (C), and of a 16-bit output's f32
// values (kernels/cpu/workspace.hpp).
float* workspace(size_t n) {
  static Buffer<float> buffer;
  return at_least(buffer, n);
}

}  // namespace

// A 16-bit input widened for the f32 kernels of the norms' backward (layernorm, rmsnorm): into a
// workspace apart from workspace(), which the f32 backward writes.
const float* widened_input(Context& ctx, Precision precision, const low16* inp, size_t n) {
  static Buffer<float> buffer;
  float* widened = at_least(buffer, n);
  from_low(ctx, precision, widened, inp, n);
  return widened;
}

void layernorm_forward(Context& ctx, float* out, float* mean, float* variance, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
  if (ctx.arithmetic == Arithmetic::portable)
    return portable_layernorm_forward(out, mean, variance, inp, weight, bias, N, C);
  const LayerNormPrimitives& p = primitives(N, C);
  run(p.forward, {{DNNL_ARG_SRC, wrap(p.data, inp)},
                  {DNNL_ARG_DST, wrap(p.data, out)},
                  {DNNL_ARG_SCALE, wrap(p.channels, weight)},
                  {DNNL_ARG_SHIFT, wrap(p.channels, bias)},
                  {DNNL_ARG_MEAN, wrap(p.stats, mean)},
                  {DNNL_ARG_VARIANCE, wrap(p.stats, variance)}},
      "forward", N, C);
}

// Into backward's workspace (the same (N, C) + 2C: no memory of its own), then rounded: the bits
// of the f32 output stored.
void layernorm_forward_low16(Context& ctx, Precision precision, low16* out, float* mean, float* variance,
                             const float* inp, const float* weight, const float* bias, int N, int C) {
  const size_t n = static_cast<size_t>(N) * C;
  float* scratch = workspace(n + 2 * static_cast<size_t>(C));
  cpu::layernorm_forward(ctx, scratch, mean, variance, inp, weight, bias, N, C);
  to_low(ctx, precision, out, scratch, n);
}

namespace {

// The f32 backward: oneDNN's, or with portable arithmetic our own.
void f32_gradients(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, const float* bias, const float* mean, const float* variance, int N, int C) {
  if (ctx.arithmetic == Arithmetic::portable)
    return portable_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, variance, N, C);
  const LayerNormPrimitives& p = primitives(N, C);
  const size_t n = static_cast<size_t>(N) * C;
  float* dx = workspace(n + 2 * static_cast<size_t>(C));
  float* dw = dx + n;
  float* db = dw + C;
  run(p.backward, {{DNNL_ARG_SRC, wrap(p.data, inp)},
                   {DNNL_ARG_DIFF_DST, wrap(p.data, dout)},
                   {DNNL_ARG_SCALE, wrap(p.channels, weight)},
                   {DNNL_ARG_SHIFT, wrap(p.channels, bias)},
                   {DNNL_ARG_MEAN, wrap(p.stats, mean)},
                   {DNNL_ARG_VARIANCE, wrap(p.stats, variance)},
                   {DNNL_ARG_DIFF_SRC, wrap(p.data, dx)},
                   {DNNL_ARG_DIFF_SCALE, wrap(p.channels, dw)},
                   {DNNL_ARG_DIFF_SHIFT, wrap(p.channels, db)}},
      "backward", N, C);
  cpu::add_inplace(ctx, dinp, dx, n);
  cpu::add_inplace(ctx, dweight, dw, C);
  cpu::add_inplace(ctx, dbias, db, C);
}

}  // namespace

void layernorm_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* bias, const float* mean, const float* variance, int N, int C,
                        Precision copy_type, low16* dinp_low) {
  f32_gradients(ctx, dinp, dweight, dbias, dout, inp, weight, bias, mean, variance, N, C);
  if (dinp_low != nullptr) to_low(ctx, copy_type, dinp_low, dinp, static_cast<size_t>(N) * C);
}

// The input widened, then the f32 backward: its bits.
void layernorm_backward_low16(Context& ctx, Precision precision, float* dinp, float* dweight, float* dbias,
                              const float* dout, const low16* inp, const float* weight, const float* bias,
                              const float* mean, const float* variance, int N, int C, low16* dinp_low) {
  const float* x = widened_input(ctx, precision, inp, static_cast<size_t>(N) * C);
  cpu::layernorm_backward(ctx, dinp, dweight, dbias, dout, x, weight, bias, mean, variance, N, C, precision, dinp_low);
}

}  // namespace trident::kernels::cpu
