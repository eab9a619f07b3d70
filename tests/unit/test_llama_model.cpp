// The Llama family on the model's machinery (model.arch = llama): every parameter tensor's
// gradient against finite differences — grouped-query and multi-head attention, tied and untied
// heads — and the tensor slots it leaves empty; the shape rules of its configuration.
#include "model_check.hpp"

using namespace trident;
using namespace trident::testing;

namespace {

model::GptConfig llama(int kv_heads, bool tied) {
  model::GptConfig c;
  c.arch = model::Arch::llama;
  c.max_seq_len = 8, c.vocab = 11, c.padded_vocab = 16, c.layers = 2, c.heads = 4, c.channels = 16;
  c.kv_heads = kv_heads, c.ffn_hidden = 24, c.rope_theta = 10000.0f, c.norm_eps = 1e-5f, c.tie_embeddings = tied;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(llama_model)

BOOST_AUTO_TEST_CASE(grouped_query_gradients_match_finite_differences) { check_model_gradients(llama(2, false), true); }

BOOST_AUTO_TEST_CASE(multi_head_tied_gradients_match_finite_differences) { check_model_gradients(llama(4, true), true); }

BOOST_AUTO_TEST_CASE(tensors_of_the_llama_slots) {
  const model::GptConfig c = llama(2, false);
  const auto specs = model::param_specs(c);
  const int64_t C = 16, hs = 4, kv = 2 * hs, F = 24, L = 2;
  BOOST_TEST(specs[model::kQkvw].shape == (std::vector<int64_t>{L, C + 2 * kv, C}));  // GQA's smaller k, v
  BOOST_TEST(specs[model::kFcw].shape == (std::vector<int64_t>{L, 2 * F, C}));        // [gate | up]
  BOOST_TEST(specs[model::kFcprojw].shape == (std::vector<int64_t>{L, C, F}));
  BOOST_TEST(specs[model::kHead].shape == (std::vector<int64_t>{16, C}));             // untied
  for (int t : {model::kWpe, model::kLn1b, model::kQkvb, model::kAttprojb, model::kLn2b, model::kFcb, model::kFcprojb,
                model::kLnfb})
    BOOST_TEST(specs[t].count() == 0, specs[t].name << " is a slot llama leaves empty");
  BOOST_TEST(model::param_specs(llama(2, true))[model::kHead].count() == 0);  // tied: wte is the head
  // FLOPs per token: 6 per weight of every GEMM (qkv with its k, v of 2 heads; SwiGLU's three) + attention.
  const double weights = L * ((C + 2 * kv) * C + C * C + 3 * F * C) + 16 * C;
  BOOST_TEST(model::training_flops_per_token(c, 8) == 6 * weights + 12.0 * L * 8 * C);
  // Llama 3 8B's width by the rule: 4096 × 8/3 × 1.3 rounded up to 1024s = 14336.
  BOOST_TEST(model::llama_ffn_hidden(4096, 1.3, 1024) == 14336);
  BOOST_TEST(model::llama_ffn_hidden(4096, 1.0, 256) == 11008);  // Llama 2 7B
  model::GptConfig bad = c;
  bad.kv_heads = 3;  // 4 query heads in groups of 3
  BOOST_TEST(!model::config_problem(bad).empty());
}

BOOST_AUTO_TEST_SUITE_END()
