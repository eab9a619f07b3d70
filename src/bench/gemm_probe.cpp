// The model's GEMM shapes and their timed pass.
#include "bench/gemm_probe.hpp"

#include <algorithm>
#include <chrono>

#include "core/clock.hpp"
#include "core/random.hpp"
#include "tensor/tensor.hpp"
#include "deck/validate.hpp"
#include "job/memory_plan.hpp"
#include "job/model_setup.hpp"

namespace trident {

using Clock = std::chrono::steady_clock;

namespace {

// The first batch·rows·cols elements of an operand buffer as (batch, rows, cols) matrices.
Tensor matrices(const Tensor& buffer, int batch, int rows, int cols) {
  return Tensor{buffer.data, buffer.dtype, Shape{batch, rows, cols}, buffer.device};
}

// The same product up to its transposes and accumulation: what shape_rates times once.
bool same_product(const GemmShape& a, const GemmShape& b) {
  return a.batch == b.batch && a.M == b.M && a.N == b.N && a.K == b.K;
}

}  // namespace

std::vector<GemmShape> model_gemms(const model::GptConfig& c, int B, int T) {
  std::vector<GemmShape> shapes;
  const int C = c.channels, BT = B * T, heads = B * c.heads, hs = c.channels / c.heads;
  for (int l = 0; l < c.layers; ++l) {
    shapes.push_back({heads, T, T, hs, false, true, false});   // S = q kᵀ
    shapes.push_back({heads, T, hs, T, false, false, false});  // y = P v
    shapes.push_back({heads, T, T, hs, false, true, false});   // dP = dy vᵀ
    shapes.push_back({heads, T, hs, T, true, false, false});   // dv = Pᵀ dy
    shapes.push_back({heads, T, hs, T, false, false, false});  // dq = dS k
    shapes.push_back({heads, T, hs, T, true, false, false});   // dk = dSᵀ q
  }
  // (K, N) of qkv, the attention's output, the MLP's input ([gate | up] for SwiGLU) and output,
  // and the head: the model's own widths (grouped key/value heads, SwiGLU's F).
  const int qkv = static_cast<int>(model::qkv_rows(c)), fc = static_cast<int>(model::fc_rows(c)),
            hidden = static_cast<int>(model::mlp_hidden(c));
  const std::pair<int, int> linears[] = {{C, qkv}, {C, C}, {C, fc}, {hidden, C}, {C, c.padded_vocab}};
  for (const auto& [K, N] : linears) {
    const int repeat = N == c.padded_vocab ? 1 : c.layers;
    for (int r = 0; r < repeat; ++r) {
      shapes.push_back({1, BT, N, K, false, true, false});  // y = x wᵀ
      shapes.push_back({1, BT, K, N, false, false, false});  // dx = dy w
      shapes.push_back({1, N, K, BT, true, false, true});    // dw += dyᵀ x
    }
  }
  return shapes;
}

GemmPass::GemmPass(const kernels::Context& device, const model::GptConfig& config, int B, int T, bool bf16)
    : ctx_(device), shapes_(model_gemms(config, B, T)), bf16_(bf16) {
  size_t largest = 0;
  for (const auto& s : shapes_) {
    largest = std::max({largest, size_t(s.batch) * s.M * s.K, size_t(s.batch) * s.K * s.N,
                        size_t(s.batch) * s.M * s.N});
    flops_ += 2.0 * s.batch * s.M * s.N * s.K;
  }
  kernels::Backend& backend = kernels::backend_of(ctx_);
  auto operand = [&](float value) {
    Buffer<float> buffer(largest, MemoryCategory::Workspace, backend, MemoryKind::device);
    kernels::upload(ctx_, buffer.view(), std::vector<float>(largest, value).data());
    return buffer;
  };
  a_ = operand(0.01f), b_ = operand(0.02f), c_ = operand(0.0f);
  if (bf16_) {
    const Shape shape{static_cast<int64_t>(largest)};
    a16_ = TensorBuffer(DType::bf16, shape, MemoryCategory::Workspace, backend, MemoryKind::device);
    b16_ = TensorBuffer(DType::bf16, shape, MemoryCategory::Workspace, backend, MemoryKind::device);
    kernels::convert(ctx_, a16_.view(), a_.view());
    kernels::convert(ctx_, b16_.view(), b_.view());
  }
}

void GemmPass::call(const GemmShape& s) {
  const Tensor a_all = bf16_ ? a16_.view() : a_.view(), b_all = bf16_ ? b16_.view() : b_.view();
  const Tensor c = matrices(c_.view(), s.batch, s.M, s.N);
  const Tensor a = matrices(a_all, s.batch, s.ta ? s.K : s.M, s.ta ? s.M : s.K);
  const Tensor b = matrices(b_all, s.batch, s.tb ? s.N : s.K, s.tb ? s.K : s.N);
  if (bf16_) kernels::batched_matmul_bf16(ctx_, c, a, b, s.ta, s.tb, s.accumulate);
  else kernels::batched_matmul(ctx_, c, a, b, s.ta, s.tb, s.accumulate);
}

void GemmPass::wait() { kernels::sum(ctx_, view(c_.data(), 1, c_.device())); }  // where the device runs behind

double GemmPass::run() {
  const auto start = Clock::now();
  for (const auto& s : shapes_) call(s);
  wait();
  return seconds_since(start);
}

std::vector<ShapeRate> GemmPass::shape_rates(int rounds, double pass_seconds) {
  std::vector<ShapeRate> rates;
  for (const GemmShape& s : shapes_) {
    if (std::any_of(rates.begin(), rates.end(), [&](const ShapeRate& r) { return same_product(r.shape, s); })) continue;
    const double flops = 2.0 * s.batch * s.M * s.N * s.K;
    call(s), wait();  // warm: the primitive created
    // Enough back-to-back calls for ~20 ms a timing (at least one), the median of `rounds`.
    const auto probe = Clock::now();
    call(s), wait();
    const int calls = std::max(1, static_cast<int>(0.02 / std::max(seconds_since(probe), 1e-7)));
    std::vector<double> seconds;
    for (int r = 0; r < rounds; ++r) {
      const auto start = Clock::now();
      for (int i = 0; i < calls; ++i) call(s);
      wait();
      seconds.push_back(seconds_since(start) / calls);
    }
    std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
    rates.push_back({s, flops / seconds[seconds.size() / 2]});
  }
  // Normalised to the pass: a shape timed alone, in a warm cache and on its own, runs at another
  // level than in the pass's sequence; the pass's time is the one a step sees.
  double alone = 0;
  for (const GemmShape& s : shapes_)
    for (const ShapeRate& r : rates)
      if (same_product(r.shape, s)) alone += 2.0 * s.batch * s.M * s.N * s.K / r.flops_per_s;
  for (ShapeRate& r : rates) r.flops_per_s *= alone / pass_seconds;
  return rates;
}

StepRunner::StepRunner(const kernels::Context& device, const RunSettings& settings, const deck::Record& deck,
                       kernels::Precision precision)
    : ctx_(model_context(device, settings.kernels)), config_(model_config(settings.model, deck)),
      gpt_(config_, ctx_, {}, precision), optimizer_(ctx_, config_, {}, {}, {}, precision) {
  const std::vector<float> initial = initial_parameters(settings, gpt_);
  gpt_.upload_params(initial.data());
  optimizer_.load_master(ctx_, initial.data());
  const RecomputeChoice recompute = choose_recompute(ctx_, settings, deck, layout::Grid(1, 1, 1), config_);
  gpt_.set_recompute_interval(recompute.mode == "full" || recompute.mode == "every_k" ? recompute.interval : 0);
  gpt_.set_attention_recompute(recompute.mode == "selective");
  set_attention_and_classifier(gpt_, settings.model);
  gpt_.set_graphs(settings.kernels.graphs);  // the step train runs: its micro-batches replayed as graphs
  B_ = settings.train.micro_batch;
  T_ = settings.train.seq_len;
  micro_batches_ = settings.train.micro_batches;
  tokens_.resize(static_cast<size_t>(B_) * T_ + 1);
  for (size_t i = 0; i < tokens_.size(); ++i)
    tokens_[i] = static_cast<int32_t>(uniform_below(1, 7, i, config_.vocab));
}

double StepRunner::run() {
  const auto start = Clock::now();
  gpt_.zero_grad();
  for (int64_t m = 0; m < micro_batches_; ++m) {
    const float scale = 1.0f / micro_batches_;  // as a training step: the head's gradient in the forward
    gpt_.enqueue_forward(0, tokens_.data(), tokens_.data() + 1, B_, T_, scale);
    gpt_.backward(scale);
  }
  const optim::GradNorm norm = optim::grad_norm(ctx_, gpt_.grads(), gpt_.num_parameters(), 1.0f);
  optimizer_.step(ctx_, gpt_.parameters_to_write(), gpt_.grads(), 1e-4f, ++updates_, norm.clip_factor);
  // The update done before the clock is read (a host read after it on the stream; not an
  // operation of the step's table): on a device it would otherwise run into what comes next.
  kernels::Context untimed = ctx_;
  untimed.op_times = nullptr;
  kernels::sum(untimed, view(gpt_.grads(), 1, ctx_.stream.device));
  return seconds_since(start);
}

}  // namespace trident
