// The two paths of the 16-bit GEMMs (kernels.low16_gemm): widened bf16 GEMMs and attention give
// native's results up to f32 rounding (both paths run where the CPU has a bf16 matmul; the
// widened one is forced per context); prepare_* creates exactly the primitives that run, so a
// model after prepare_kernels creates none in forward and backward; and, where the CPU has no
// bf16 matmul, the native path fails with a message naming the GEMM and the ISA. A case that
// needs the CPU feature this machine lacks is skipped (Boost's precondition), not failed.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_check.hpp"
#include "kernels/backend.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/kernels.hpp"
#include "model/transformer.hpp"
#include "model_check.hpp"

using namespace trident;
using kernels::bf16;
using kernels::Low16Gemm;
using kernels::Precision;

namespace {

namespace utf = boost::unit_test;

kernels::Context with_path(Low16Gemm path) {
  kernels::Context ctx;
  ctx.low16_gemm = path;
  return ctx;
}

boost::test_tools::assertion_result native_bf16(utf::test_unit_id) {
  boost::test_tools::assertion_result result(kernels::native_low16_gemm_available(Precision::bf16));
  result.message() << "oneDNN has no bf16 matmul on " << kernels::cpu_isa();
  return result;
}

boost::test_tools::assertion_result no_native_bf16(utf::test_unit_id) {
  boost::test_tools::assertion_result result(!kernels::native_low16_gemm_available(Precision::bf16));
  result.message() << "oneDNN has a bf16 matmul on " << kernels::cpu_isa();
  return result;
}

// max |a − b| / (1 + |b|)
double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - double(b[i])) / (1.0 + std::fabs(b[i])));
  return worst;
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::pow(a[i] - double(b[i]), 2), norm += std::pow(double(b[i]), 2);
  return std::sqrt(diff / norm);
}

std::vector<bf16> to_bf16(const std::vector<float>& values) {
  kernels::Context ctx;
  std::vector<bf16> out(values.size());
  kernels::cpu::to_bf16(ctx, out.data(), values.data(), values.size());
  return out;
}

// The linear layer's forward and backward outputs (y, dx, dw, db) on one path.
std::vector<std::vector<float>> linear_outputs(Low16Gemm path, int M, int K, int N) {
  kernels::Context ctx = with_path(path);
  const auto x = to_bf16(testing::random_vector(size_t(M) * K, 1)), w = to_bf16(testing::random_vector(size_t(N) * K, 2));
  const std::vector<float> dy = testing::random_vector(size_t(M) * N, 3), bias = testing::random_vector(N, 4);
  std::vector<bf16> dy16(dy.size());
  std::vector<float> y(size_t(M) * N), dx(size_t(M) * K), dw(size_t(N) * K, 0.5f), db(N, 0.25f);
  kernels::cpu::linear_forward_low(ctx, Precision::bf16, y.data(), x.data(), w.data(), bias.data(), M, K, N);
  kernels::cpu::to_bf16(ctx, dy16.data(), dy.data(), dy.size());
  kernels::cpu::linear_backward_low(ctx, Precision::bf16, dx.data(), dw.data(), db.data(), dy.data(), dy16.data(), x.data(),
                               w.data(), M, K, N);
  return {y, dx, dw, db};
}

// The attention core's outputs (out, P, dqkv) on one path.
std::vector<std::vector<float>> attention_outputs(Low16Gemm path, int B, int T, int C, int NH) {
  kernels::Context ctx = with_path(path);
  const size_t n_qkv = size_t(B) * T * 3 * C, n_out = size_t(B) * T * C, n_att = size_t(B) * NH * T * T;
  const auto qkv16 = to_bf16(testing::random_vector(n_qkv, 5));
  const std::vector<float> dout = testing::random_vector(n_out, 6);
  std::vector<bf16> att16(n_att), dout16(n_out);
  std::vector<float> out(n_out), att(n_att), datt(n_att), dqkv(n_qkv);
  const Tensor qkv_low = testing::as_tensor(qkv16, DType::bf16, {B, T, 3 * C});
  const Tensor att_low = testing::as_tensor(att16, DType::bf16, {B, NH, T, T});
  const Tensor dout_low = testing::as_tensor(dout16, DType::bf16, {B, T, C});
  kernels::attention_forward_bf16(ctx, testing::as_tensor(out), testing::as_tensor(att), att_low, qkv_low, NH);
  kernels::attention_backward_bf16(ctx, testing::as_tensor(dqkv), testing::as_tensor(datt), testing::as_tensor(dout),
                                   dout_low, qkv_low, testing::as_tensor(att), att_low, NH);
  return {out, att, dqkv};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gemm_path)

BOOST_AUTO_TEST_CASE(widened_bf16_linear_matches_native, *utf::precondition(native_bf16)) {
  const int M = 96, K = 80, N = 112;
  const auto native = linear_outputs(Low16Gemm::native, M, K, N), widened = linear_outputs(Low16Gemm::widened, M, K, N);
  const char* names[] = {"y", "dx", "dw", "db"};
  for (int i = 0; i < 4; ++i) {
    // The same exact products, summed in f32 in another order: K·2^-24 relative at most.
    const double worst = worst_difference(widened[i], native[i]);
    BOOST_TEST(worst < 1e-5, names[i] << ": worst difference " << worst);
  }
}

BOOST_AUTO_TEST_CASE(widened_bf16_batched_matmul_matches_native, *utf::precondition(native_bf16)) {
  const int batch = 3, M = 17, N = 23, K = 41;
  const auto a = to_bf16(testing::random_vector(size_t(batch) * M * K, 7));
  const auto b = to_bf16(testing::random_vector(size_t(batch) * K * N, 8));
  for (bool ta : {false, true}) {
    std::vector<float> native(size_t(batch) * M * N, 1.0f), widened = native;
    kernels::Context n = with_path(Low16Gemm::native), w = with_path(Low16Gemm::widened);
    const bool tb = !ta;
    const Tensor a_t = testing::as_tensor(a, DType::bf16, {batch, ta ? K : M, ta ? M : K});
    const Tensor b_t = testing::as_tensor(b, DType::bf16, {batch, tb ? N : K, tb ? K : N});
    kernels::batched_matmul_bf16(n, testing::as_tensor(native, {batch, M, N}), a_t, b_t, ta, tb, true);
    kernels::batched_matmul_bf16(w, testing::as_tensor(widened, {batch, M, N}), a_t, b_t, ta, tb, true);
    BOOST_TEST(worst_difference(widened, native) < 1e-5, "transpose a " << ta);
  }
}

// P is rounded to bf16 from f32 scores that the two paths sum in different orders: a score on a
// rounding boundary can round the other way (one bf16 ulp, 2^-8, in a rare probability), so
// the comparison is of L2 norms, at f32 rounding's scale rather than bf16's (2^-9 ≈ 2e-3).
BOOST_AUTO_TEST_CASE(widened_bf16_attention_matches_native, *utf::precondition(native_bf16)) {
  const int B = 2, T = 24, C = 64, NH = 4;
  const auto native = attention_outputs(Low16Gemm::native, B, T, C, NH);
  const auto widened = attention_outputs(Low16Gemm::widened, B, T, C, NH);
  const char* names[] = {"output", "probabilities", "dqkv"};
  for (int i = 0; i < 3; ++i) {
    const double error = relative_l2(widened[i], native[i]);
    BOOST_TEST_MESSAGE("widened vs native bf16 attention, relative L2 " << names[i] << " " << error);
    BOOST_TEST(error < 1e-4, names[i] << ": relative L2 difference " << error);
  }
}

// Where oneDNN has no bf16 matmul (e.g. DNNL_MAX_CPU_ISA=AVX2), forcing native fails before
// anything runs, naming the GEMM, its types and the ISA, with the remedy.
BOOST_AUTO_TEST_CASE(native_bf16_without_the_cpu_feature_names_gemm_and_isa, *utf::precondition(no_native_bf16)) {
  kernels::Context ctx = with_path(Low16Gemm::native);
  std::string message;
  try {
    kernels::prepare_linear(ctx, Precision::bf16, 8, 16, 24, true);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  BOOST_TEST(message.find("bf16 x bf16 -> f32 matmul") != std::string::npos, message);
  BOOST_TEST(message.find("M 8 N 24 K 16") != std::string::npos, message);
  BOOST_TEST(message.find(kernels::cpu_isa()) != std::string::npos, message);
  BOOST_TEST(message.find("kernels.low16_gemm = widened") != std::string::npos, message);
  BOOST_TEST(kernels::widens_low16(kernels::Context{}, Precision::bf16));  // auto: widened here
}

BOOST_AUTO_TEST_CASE(gemm_path_is_reported) {
  const kernels::Context widened = with_path(Low16Gemm::widened);
  BOOST_TEST(kernels::gemm_path_summary(widened, Precision::bf16).rfind("bf16 GEMM: widened to f32 (", 0) == 0);
  BOOST_TEST(kernels::gemm_path_summary(widened, Precision::fp32) == "fp32 GEMM: f32 on " + kernels::cpu_isa());
  const std::string automatic = kernels::gemm_path_summary(kernels::Context{}, Precision::bf16);
  if (kernels::native_low16_gemm_available(Precision::bf16))
    BOOST_TEST(automatic.rfind("bf16 GEMM: native " + kernels::cpu_isa(), 0) == 0, automatic);
  else
    BOOST_TEST(automatic == "bf16 GEMM: widened to f32 (no bf16 matmul on " + kernels::cpu_isa() + ")");
  BOOST_TEST(!kernels::widens_low16(widened, Precision::fp32));
  // A device's kernels take neither this CPU's path nor its widening workspace, whatever it offers
  // (the memory model of a GPU run counts none).
  if (kernels::Backend* cuda = kernels::find_backend("cuda")) {
    kernels::Context device = widened;
    device.backend = cuda;
    BOOST_TEST(!kernels::widens_low16(device, Precision::bf16));
    BOOST_TEST(kernels::gemm_path_summary(device, Precision::bf16) == "bf16 GEMM: on the device (kernels.device = cuda)");
  }
}

// Transformer::prepare_kernels creates every GEMM primitive that forward and backward then run (on
// the first and last stage, with and without selective recompute, in every precision and path).
BOOST_AUTO_TEST_CASE(prepare_kernels_creates_every_gemm_the_model_runs) {
  model::GptConfig config;
  config.max_seq_len = 32, config.vocab = 40, config.padded_vocab = 128, config.layers = 2, config.heads = 4;
  config.channels = 32;
  std::vector<Low16Gemm> paths{Low16Gemm::widened};
  if (kernels::native_low16_gemm_available(Precision::bf16)) paths.push_back(Low16Gemm::native);
  int case_index = 0;
  for (Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16})
    for (Low16Gemm path : paths)
      for (bool selective : {false, true}) {
        const int B = 2 + case_index % 3, T = 9 + case_index++;  // new shapes: nothing cached yet
        if (precision == Precision::fp16 && path == Low16Gemm::native) continue;
        kernels::Context ctx = with_path(path);
        model::Transformer gpt(config, ctx, {}, precision);
        testing::initialise(gpt, 3);
        gpt.set_attention_recompute(selective);
        gpt.prepare_kernels(B, T);
        const int64_t prepared = kernels::gemm_primitives_created();
        std::vector<int32_t> tokens(B * T + 1);
        for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 7 % config.vocab);
        gpt.zero_grad();
        gpt.forward(tokens.data(), tokens.data() + 1, B, T);
        gpt.backward(1.0f);
        BOOST_TEST(kernels::gemm_primitives_created() == prepared,
                   kernels::precision_name(precision) << (path == Low16Gemm::widened ? " widened" : " native")
                                                      << (selective ? " selective" : "") << ": "
                                                      << kernels::gemm_primitives_created() - prepared
                                                      << " GEMM primitives created after prepare_kernels");
      }
}

BOOST_AUTO_TEST_SUITE_END()
