// The whole GPT-2 model on a tiny configuration: gradients of every parameter tensor against
// finite differences, padded vocabulary rows untouched, determinism, initialisation.
#include <algorithm>
#include <cstring>

#include "kernel_check.hpp"
#include "core/random.hpp"
#include "model/transformer.hpp"
#include "model_check.hpp"

using namespace trident;
using namespace trident::testing;

namespace {

trident::model::GptConfig tiny_config() {
  trident::model::GptConfig c;
  c.max_seq_len = 8, c.vocab = 11, c.padded_vocab = 16, c.layers = 2, c.heads = 2, c.channels = 8;
  return c;
}


}  // namespace

BOOST_AUTO_TEST_SUITE(model)

BOOST_AUTO_TEST_CASE(model_gradients_match_finite_differences) {
  const auto config = tiny_config();
  const std::vector<float> analytic = check_model_gradients(config, false);
  // Padded vocabulary rows of wte (rows V..Vp) get no gradient.
  for (int64_t i = int64_t(config.vocab) * config.channels; i < int64_t(config.padded_vocab) * config.channels; ++i)
    BOOST_REQUIRE(analytic[i] == 0.0f);
}

BOOST_AUTO_TEST_CASE(model_is_deterministic_and_accumulates) {
  kernels::Context ctx;
  const auto config = tiny_config();
  trident::model::Transformer gpt(config, ctx);
  trident::model::init_params(config, gpt.params(), 7);
  const auto inputs = test_tokens(16, 3, config.vocab), targets = test_tokens(16, 4, config.vocab);
  gpt.zero_grad();
  const float first = gpt.forward(inputs.data(), targets.data(), 2, 8);
  gpt.backward(1.0f);
  const std::vector<float> once(gpt.grads(), gpt.grads() + gpt.num_parameters());
  const float second = gpt.forward(inputs.data(), targets.data(), 2, 8);
  gpt.backward(1.0f);
  BOOST_TEST(first == second);
  bool doubled = true;
  for (int64_t i = 0; i < gpt.num_parameters(); ++i)
    doubled = doubled && std::fabs(gpt.grads()[i] - 2 * once[i]) <= 1e-5f * std::fabs(once[i]) + 1e-9f;
  BOOST_TEST(doubled);
  // At initialisation the loss is close to log(V): the logits are small.
  BOOST_TEST(std::fabs(first - std::log(11.0f)) < 0.1f);
}

BOOST_AUTO_TEST_CASE(initialisation_follows_gpt2) {
  kernels::Context ctx;
  auto config = tiny_config();
  config.channels = 64, config.heads = 4, config.layers = 4;
  trident::model::Transformer gpt(config, ctx);
  trident::model::init_params(config, gpt.params(), 1);
  const auto& p = gpt.param_views();
  auto stddev = [](const float* x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
    return std::sqrt(s / n);
  };
  const size_t C = 64, L = 4;
  BOOST_TEST(std::fabs(stddev(p.qkvw, L * 3 * C * C) - 0.02) < 0.001);
  BOOST_TEST(std::fabs(stddev(p.fcprojw, L * 4 * C * C) - 0.02 / std::sqrt(8.0)) < 0.0005);
  BOOST_TEST(p.ln1w[5] == 1.0f);
  BOOST_TEST(p.qkvb[3] == 0.0f);
  BOOST_TEST(p.lnfb[0] == 0.0f);
  // Counter-based: the same element has the same value whatever else is initialised.
  BOOST_TEST(static_cast<float>(0.02 * trident::normal_at(1, 0, 77)) == p.wte[77]);
}

BOOST_AUTO_TEST_CASE(tensor_slices_partition_every_tensor) {
  auto config = tiny_config();
  config.heads = 4, config.channels = 16;
  const auto whole_specs = trident::model::param_specs(config);
  for (int p : {1, 2, 4}) {
    for (int t = 0; t < trident::model::kNumParamTensors; ++t) {
      std::vector<int> seen(whole_specs[t].count(), 0);
      for (int r = 0; r < p; ++r) {
        const trident::model::Partition slice{r, p};
        const auto spec = trident::model::param_specs(config, slice)[t];
        for (int64_t i = 0; i < spec.count(); ++i) ++seen[trident::model::global_index(config, slice, t, i)];
      }
      // Split tensors: every element on exactly one rank; replicated ones: on every rank.
      const int expected = whole_specs[t].count() == trident::model::param_specs(config, {0, p})[t].count() && p > 1 ? p : 1;
      BOOST_TEST(std::all_of(seen.begin(), seen.end(), [&](int n) { return n == expected; }),
                 whole_specs[t].name << " over " << p);
    }
    // The slice of the serial initialisation is the slice's own initialisation.
    std::vector<float> whole(trident::model::num_parameters(config)), cut(trident::model::num_parameters(config, {1 % p, p}));
    std::vector<float> own(cut.size());
    trident::model::init_params(config, whole.data(), 9);
    trident::model::extract_slice(config, whole.data(), cut.data(), {1 % p, p});
    trident::model::init_params(config, own.data(), 9, {1 % p, p});
    BOOST_TEST(cut == own);
    // And any ranges of it initialised alone (ZeRO-3's owned ranges), across tensor boundaries.
    const int64_t n = static_cast<int64_t>(own.size());
    const trident::model::FlatRanges ranges{{0, 3}, {n / 3, n / 2 + 7}, {n - 5, n}};
    std::vector<float> parts(static_cast<size_t>(trident::model::total_count(ranges)));
    trident::model::init_param_ranges(config, ranges, parts.data(), 9, {1 % p, p});
    std::vector<float> expected;
    for (const auto& r : ranges) expected.insert(expected.end(), own.begin() + r.begin, own.begin() + r.end);
    BOOST_TEST(parts == expected);
  }
}

// A 16-bit model's parameters are 16-bit; the tensors its f32 kernels read (here the final
// LayerNorm's bias) come from an f32 copy that must be widened again after the optimizer writes
// the parameters (parameters_to_write), or the next forward would read the old values.
BOOST_AUTO_TEST_CASE(parameters_written_in_16_bits_reach_the_f32_reads) {
  kernels::Context ctx;
  auto config = tiny_config();
  const int B = 2, T = 4;
  const auto inputs = test_tokens(B * T, 7, config.vocab), targets = test_tokens(B * T, 8, config.vocab);
  trident::model::Transformer gpt(config, ctx, {}, kernels::Precision::bf16);
  trident::testing::initialise(gpt, 11);
  BOOST_CHECK_THROW(gpt.params(), std::logic_error);  // no f32 parameters
  const float before = gpt.forward(inputs.data(), targets.data(), B, T);
  std::vector<float> values = gpt.host_params();
  const auto offsets = trident::model::param_offsets(config);
  for (int c = 0; c < config.channels; ++c) values[offsets[trident::model::kLnfb] + c] += 0.5f * (c % 3);
  const Tensor params = gpt.parameters_to_write();
  BOOST_TEST((params.dtype == DType::bf16));
  kernels::convert(ctx, params, view(values.data(), values.size(), Device{}));
  BOOST_TEST(gpt.forward(inputs.data(), targets.data(), B, T) != before);
}

// Mixed precision: with the same parameters, the bf16 and fp16 models' loss and gradients are
// the fp32 model's up to their rounding: at GPT-2's initialisation, the relative L2 error of
// each tensor's gradient within two units of the type's precision (2·2^-8, 2·2^-11; measured
// at most 1.2 units for either). Parameters uploaded again reach the next forward (the f32
// copy of the small tensors too).
BOOST_AUTO_TEST_CASE(low_precision_models_follow_fp32) {
  kernels::Context ctx;
  auto config = tiny_config();
  config.channels = 32, config.heads = 4, config.max_seq_len = 16;
  const int B = 2, T = 16;
  const auto inputs = test_tokens(B * T, 5, config.vocab), targets = test_tokens(B * T, 6, config.vocab);
  auto run = [&](kernels::Precision precision, float* loss, float scale = 1.0f) {
    trident::model::Transformer gpt(config, ctx, {}, precision);
    trident::testing::initialise(gpt, 11);
    gpt.zero_grad();
    *loss = gpt.forward(inputs.data(), targets.data(), B, T);
    gpt.backward(scale);
    return std::vector<float>(gpt.grads(), gpt.grads() + gpt.num_parameters());
  };
  float loss32 = 0, loss16 = 0;
  const std::vector<float> reference = run(kernels::Precision::fp32, &loss32);
  for (auto [precision, tolerance] : {std::pair{kernels::Precision::bf16, 2.0 / 256}, std::pair{kernels::Precision::fp16, 2.0 / 2048}}) {
    const std::vector<float> grads = run(precision, &loss16, 1024.0f);  // fp16's loss scaling: S = 1024
    BOOST_TEST(std::fabs(loss16 - loss32) <= tolerance * loss32);
    int64_t offset = 0;
    for (const auto& spec : trident::model::param_specs(config)) {
      double diff = 0, norm = 0;
      for (int64_t i = offset; i < offset + spec.count(); ++i) {
        diff += std::pow(grads[i] / 1024.0 - reference[i], 2);
        norm += std::pow(double(reference[i]), 2);
      }
      BOOST_TEST(std::sqrt(diff) <= tolerance * std::sqrt(norm) + 1e-7,
                 kernels::precision_name(precision) << " " << spec.name << ": relative error " << std::sqrt(diff / norm));
      offset += spec.count();
    }
  }
  trident::model::Transformer gpt(config, ctx, {}, kernels::Precision::bf16);
  trident::testing::initialise(gpt, 11);
  const float before = gpt.forward(inputs.data(), targets.data(), B, T);
  trident::testing::initialise(gpt, 11, 3.0f);
  BOOST_TEST(gpt.forward(inputs.data(), targets.data(), B, T) != before);
}

// Shapes read from files may lie: config_problem refuses impossible ones and those whose
// parameter count would overflow, and passes GPT-2's.
BOOST_AUTO_TEST_CASE(config_problem_refuses_impossible_and_overflowing_shapes) {
  using trident::model::GptConfig;
  const GptConfig gpt2{1024, 50257, 50304, 12, 12, 768};
  BOOST_TEST(trident::model::config_problem(gpt2).empty());
  GptConfig c = gpt2;
  c.padded_vocab = 100;
  BOOST_TEST(trident::model::config_problem(c).find("inconsistent model shape") != std::string::npos);
  c = gpt2, c.channels = 770;  // not a multiple of 12 heads
  BOOST_TEST(!trident::model::config_problem(c).empty());
  c = gpt2, c.max_seq_len = 0;
  BOOST_TEST(!trident::model::config_problem(c).empty());
  c = gpt2, c.channels = 2000000004, c.layers = 2000000000;  // 12·L·C² overflows int64 many times
  BOOST_TEST(trident::model::config_problem(c).find("any run can hold") != std::string::npos);
  c = gpt2, c.max_seq_len = 2147483647;  // 1.6e12 parameters: possible, if the file holds them
  BOOST_TEST(trident::model::config_problem(c).empty());
}

BOOST_AUTO_TEST_SUITE_END()
