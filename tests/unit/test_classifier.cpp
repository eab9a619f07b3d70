// The fused, chunked classifier (model/classifier.hpp) against the whole one, in the model:
// the losses and every parameter's gradient, in every precision, with chunks of one token, of
// sizes that do not divide B·T, of exactly B·T and of more; gradients accumulated over two
// micro-batches; and no logits kept.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_check.hpp"
#include "model/transformer.hpp"
#include "model_check.hpp"

using namespace trident;
using namespace trident::testing;

namespace {

model::GptConfig small_config() {
  model::GptConfig c;  // 11 real tokens in 16 rows: padding rows whose gradient must stay 0
  c.max_seq_len = 8, c.vocab = 11, c.padded_vocab = 16, c.layers = 2, c.heads = 4, c.channels = 32;
  return c;
}

std::vector<int32_t> tokens(int n, unsigned seed, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 5 + seed * 3 + i * i) % vocab);
  return t;
}

struct Run {
  std::vector<float> losses, grads;
};

// Two micro-batches of (B, T) = (2, 5) forward and backward (the gradients accumulate);
// fused: as a training step, the head's gradient computed in the forward.
Run run(kernels::Precision precision, int chunk, bool fused = false) {
  kernels::Context ctx;
  const model::GptConfig config = small_config();
  model::Transformer gpt(config, ctx, {}, precision);
  gpt.set_classifier_chunk(chunk);
  testing::initialise(gpt, 7, 4.0f);  // logits of order 1
  const int B = 2, T = 5;
  Run r;
  gpt.zero_grad();
  for (unsigned micro = 0; micro < 2; ++micro) {
    const auto inputs = tokens(B * T, 1 + micro, config.vocab), targets = tokens(B * T, 2 + micro, config.vocab);
    const float scale = precision == kernels::Precision::fp16 ? 256.0f : 1.0f;
    if (fused) gpt.enqueue_forward(0, inputs.data(), targets.data(), B, T, scale);
    else gpt.forward(inputs.data(), targets.data(), B, T);
    r.losses.insert(r.losses.end(), gpt.losses(), gpt.losses() + B * T);
    gpt.backward(scale);
  }
  r.grads.assign(gpt.grads(), gpt.grads() + gpt.num_parameters());
  return r;
}

std::vector<double> wide(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

BOOST_AUTO_TEST_SUITE(classifier)

// fp32: the same products summed over other row blocks — within a few roundings. bf16 and
// fp16: the chunk's GEMMs may round a value the other way, which the 16-bit dlogits carry into
// the gradients: within a unit of the type (2^-8, 2^-11) of the values' scale.
BOOST_AUTO_TEST_CASE(chunks_equal_the_whole_classifier_in_every_precision) {
  const std::pair<kernels::Precision, double> precisions[] = {
      {kernels::Precision::fp32, 1e-5}, {kernels::Precision::bf16, 1.0 / 256}, {kernels::Precision::fp16, 1.0 / 2048}};
  for (const auto& [precision, rtol] : precisions) {
    const Run whole = run(precision, 0);
    double scale = 0;
    for (float g : whole.grads) scale = std::max(scale, double(std::fabs(g)));
    for (int chunk : {1, 3, 4, 10, 64}) {
      const std::string at = std::string(kernels::precision_name(precision)) + " chunk " + std::to_string(chunk);
      const Run chunked = run(precision, chunk);
      expect_close(chunked.losses, wide(whole.losses), rtol, 1.0, "losses, " + at);
      expect_close(chunked.grads, wide(whole.grads), rtol, scale, "gradients, " + at);
    }
  }
}

// A training step's forward computes the head's gradient from the logits it has (no second
// GEMM in backward): the same operations on the same values as the backward's, so the same bits.
BOOST_AUTO_TEST_CASE(the_training_forward_computes_the_backward_gradient) {
  for (auto precision : {kernels::Precision::fp32, kernels::Precision::bf16, kernels::Precision::fp16}) {
    const Run later = run(precision, 3), fused = run(precision, 3, true);
    BOOST_TEST(fused.losses == later.losses, kernels::precision_name(precision));
    BOOST_TEST(fused.grads == later.grads, kernels::precision_name(precision));
  }
  kernels::Context ctx;
  const model::GptConfig config = small_config();
  model::Transformer gpt(config, ctx);
  gpt.set_classifier_chunk(4);
  model::init_params(config, gpt.params(), 7);
  const auto inputs = tokens(10, 1, config.vocab);
  gpt.enqueue_forward(0, inputs.data(), inputs.data(), 2, 5, 2.0f);
  BOOST_CHECK_THROW(gpt.backward(1.0f), std::logic_error);  // not the scale the forward used
}

// The gradient is the classifier's, not a copy of the whole one's: a wrong target, row or chunk
// offset changes it (the comparison above can fail).
BOOST_AUTO_TEST_CASE(the_gradient_follows_the_targets) {
  const Run a = run(kernels::Precision::fp32, 3);
  kernels::Context ctx;
  const model::GptConfig config = small_config();
  model::Transformer gpt(config, ctx);
  gpt.set_classifier_chunk(3);
  testing::initialise(gpt, 7, 4.0f);
  const auto inputs = tokens(10, 1, config.vocab), targets = tokens(10, 9, config.vocab);
  gpt.zero_grad();
  gpt.forward(inputs.data(), targets.data(), 2, 5);
  gpt.backward(1.0f);
  double diff = 0;
  for (int64_t i = 0; i < gpt.num_parameters(); ++i) diff += std::fabs(gpt.grads()[i] - a.grads[i]);
  BOOST_TEST(diff > 1e-3);
  BOOST_CHECK_THROW(gpt.logits(), std::logic_error);  // no logits are kept
}

BOOST_AUTO_TEST_SUITE_END()
