// `trident bench DECK --kernels`: our OpenMP LayerNorm and GELU kernels beside oneDNN's
// primitives for the same work on the deck's shapes — the measurement behind the choice of
// which the model uses (docs/PERFORMANCE.md).
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "kernels/backend.hpp"
#include "kernels/cpu/openmp_alternatives.hpp"
#include "kernels/kernels.hpp"

namespace trident {
namespace {

using dnnl::memory;
using Clock = std::chrono::steady_clock;

// Best time of `repeats` runs after one warm-up, in milliseconds.
double best_ms(int repeats, const std::function<void()>& body) {
  body();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    body();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return best;
}

void report(const std::string& what, double ours, double onednn) {
  char line[160];
  std::snprintf(line, sizeof line, "kernel %-24s ours_ms=%8.3f onednn_ms=%8.3f onednn/ours=%5.2f",
                what.c_str(), ours, onednn, onednn / ours);
  print0(line);
}

void compare_gelu(int rows, int cols, int repeats) {
  kernels::Context ctx{&kernels::cpu_backend(), {}};  // ours against oneDNN: the CPU's kernels, on host memory
  const size_t n = size_t(rows) * cols;
  std::vector<float> x(n, 0.3f), y(n), dy(n, 1.0f), dx(n);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc md({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
  memory src(md, engine, x.data()), dst(md, engine, y.data()), ddst(md, engine, dy.data()),
      dsrc(md, engine, dx.data());
  const auto fwd_pd = dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training,
                                  dnnl::algorithm::eltwise_gelu_tanh, md, 0.f, 0.f), engine);
  const auto bwd_pd = dnnl::eltwise_backward::primitive_desc(
      dnnl::eltwise_backward::desc(dnnl::algorithm::eltwise_gelu_tanh, md, md, 0.f, 0.f), engine, fwd_pd);
  dnnl::eltwise_forward fwd(fwd_pd);
  dnnl::eltwise_backward bwd(bwd_pd);
  report("gelu forward", best_ms(repeats, [&] { kernels::openmp::gelu_forward(y.data(), x.data(), n); }),
         best_ms(repeats, [&] { fwd.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}); stream.wait(); }));
  const Tensor dx_t = view(dx.data(), n), x_t = view(x.data(), n), dy_t = view(dy.data(), n);
  report("gelu backward", best_ms(repeats, [&] { kernels::gelu_backward(ctx, dx_t, x_t, dy_t); }),
         best_ms(repeats, [&] {
           bwd.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}});
           stream.wait();
         }));
}

void compare_layernorm(int rows, int cols, int repeats) {
  const size_t n = size_t(rows) * cols;
  std::vector<float> x(n), y(n), dy(n, 0.5f), dx(n), w(cols, 1.0f), b(cols, 0.0f), dw(cols), db(cols);
  std::vector<float> mean(rows), rstd(rows), variance(rows);
  for (size_t i = 0; i < n; ++i) x[i] = float(i % 97) * 0.01f;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc md({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc stat_md({rows}, memory::data_type::f32, memory::format_tag::a);
  const memory::desc channel_md({cols}, memory::data_type::f32, memory::format_tag::a);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const auto fwd_pd = dnnl::layer_normalization_forward::primitive_desc(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, md, 1e-5f, flags), engine);
  const auto bwd_pd = dnnl::layer_normalization_backward::primitive_desc(
      dnnl::layer_normalization_backward::desc(dnnl::prop_kind::backward, md, md, 1e-5f, flags), engine, fwd_pd);
  dnnl::layer_normalization_forward fwd(fwd_pd);
  dnnl::layer_normalization_backward bwd(bwd_pd);
  memory src(md, engine, x.data()), dst(md, engine, y.data()), ddst(md, engine, dy.data()),
      dsrc(md, engine, dx.data()), scale(channel_md, engine, w.data()), shift(channel_md, engine, b.data()),
      dscale(channel_md, engine, dw.data()), dshift(channel_md, engine, db.data()),
      m(stat_md, engine, mean.data()), var(stat_md, engine, variance.data());
  report("layernorm forward",
         best_ms(repeats, [&] { kernels::openmp::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, cols); }),
         best_ms(repeats, [&] {
           fwd.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale},
                                {DNNL_ARG_SHIFT, shift}, {DNNL_ARG_MEAN, m}, {DNNL_ARG_VARIANCE, var}});
           stream.wait();
         }));
  kernels::openmp::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, cols);
  report("layernorm backward",
         best_ms(repeats, [&] { kernels::openmp::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, cols); }),
         best_ms(repeats, [&] {
           bwd.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift},
                                {DNNL_ARG_MEAN, m}, {DNNL_ARG_VARIANCE, var}, {DNNL_ARG_DIFF_SRC, dsrc},
                                {DNNL_ARG_DIFF_SCALE, dscale}, {DNNL_ARG_DIFF_SHIFT, dshift}});
           stream.wait();
         }));
}

}  // namespace

// rows = B·T of a micro-batch, channels = C.
void compare_kernels_with_onednn(int rows, int channels, int repeats) {
  compare_layernorm(rows, channels, repeats);
  compare_gelu(rows, 4 * channels, repeats);
}

}  // namespace trident
