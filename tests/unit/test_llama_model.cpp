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

// Fewer key/value heads (2) than tensor ranks (4): ranks 0 and 1 hold head 0's k and v rows,
// ranks 2 and 3 head 1's, each beside its own quarter of q; the copies on ranks 1 and 3 are
// what the norm and the checkpoint count once.
BOOST_AUTO_TEST_CASE(key_value_heads_replicated_over_more_ranks) {
  const model::GptConfig c = llama(2, false);  // C 16, 4 heads of 4, 2 key/value heads
  const int64_t C = 16, hs = 4, whole_rows = C + 2 * 2 * hs, rows = C / 4 + 2 * hs;
  BOOST_TEST(model::kv_replicas(c, 4) == 2);
  BOOST_TEST(model::qkv_rows_local(c, 4) == rows);
  for (int r = 0; r < 4; ++r) {
    const model::Partition part = model::stage_partition({2}, 0, r, 4);
    BOOST_TEST(model::param_specs(c, part)[model::kQkvw].shape == (std::vector<int64_t>{2, rows, C}));
    auto row_of = [&](int64_t local_row) {  // block 1's row, in the whole (L, rows, C)
      return (model::global_index(c, part, model::kQkvw, (rows + local_row) * C) / C) - whole_rows;
    };
    BOOST_TEST(row_of(0) == r * C / 4);                       // its q
    BOOST_TEST(row_of(C / 4) == C + (r / 2) * hs);            // its head's k
    BOOST_TEST(row_of(C / 4 + hs) == C + 2 * hs + (r / 2) * hs);  // and v
    const auto copies = model::replica_ranges(c, part, model::kQkvw);
    BOOST_TEST(copies.size() == (r % 2 == 1 ? 2u : 0u));
    if (r % 2 == 1) BOOST_TEST((copies[1] == std::pair<int64_t, int64_t>{(rows + C / 4) * C, 2 * rows * C}));
  }
  BOOST_TEST(model::kv_replicas(c, 2) == 1);  // two ranks: a head each, no copies
}

// One block's parameters (what the planner's ZeRO-3 and FSDP terms gather) are what a block adds
// to a stage, for GPT-2 and Llama, key/value heads split and replicated over the tensor ranks.
BOOST_AUTO_TEST_CASE(a_block_count_is_what_a_block_adds_to_a_stage) {
  model::GptConfig gpt2;
  gpt2.max_seq_len = 8, gpt2.vocab = 11, gpt2.padded_vocab = 16, gpt2.layers = 3, gpt2.heads = 4, gpt2.channels = 16;
  for (const model::GptConfig& c : {gpt2, llama(2, false), llama(4, true)})
    for (int tensor : {1, 2, 4}) {
      const int64_t added = model::num_parameters(c, model::stage_partition({2, 1}, 0, 0, tensor)) -
                            model::num_parameters(c, model::stage_partition({1, 2}, 0, 0, tensor));
      BOOST_TEST(model::block_parameters(c, tensor) == added, model::arch_name(c.arch) << " over " << tensor);
      BOOST_TEST(model::block_parameters(c, tensor) > 0);
    }
}

// The architectures as rows of the parts table (model/block_parts.hpp).
BOOST_AUTO_TEST_CASE(architectures_are_rows_of_parts) {
  const model::BlockParts llama_parts = model::block_parts(llama(2, false));
  BOOST_TEST((llama_parts.norm == model::NormPart::rms));
  BOOST_TEST((llama_parts.positions == model::PositionPart::rotary));
  BOOST_TEST((llama_parts.activation == model::ActivationPart::swiglu));
  BOOST_TEST(!llama_parts.biases);
  BOOST_TEST(llama_parts.norm_gradients() == 1);
  model::GptConfig gpt2 = llama(4, true);
  gpt2.arch = model::Arch::gpt2;
  const model::BlockParts gpt2_parts = model::block_parts(gpt2);
  BOOST_TEST((gpt2_parts.norm == model::NormPart::layer));
  BOOST_TEST(gpt2_parts.learned_positions());
  BOOST_TEST((gpt2_parts.activation == model::ActivationPart::gelu));
  BOOST_TEST(gpt2_parts.biases);
  BOOST_TEST(gpt2_parts.norm_gradients() == 2);
}

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
