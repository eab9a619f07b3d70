// Generation (issue 19): the key/value-cache decoder gives the logits of the model's own full
// forward at every position, so greedy decoding is the argmax of that forward; sampling is
// determined by the seed and follows softmax(logits / temperature) restricted to the top k.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/transformer.hpp"
#include "model/kv_cache.hpp"
#include "model/sampler.hpp"
#include "tensor/buffer.hpp"

namespace model = trident::model;
namespace kernels = trident::kernels;

namespace {

model::GptConfig small_config() {
  model::GptConfig c;
  c.max_seq_len = 24, c.vocab = 50, c.padded_vocab = 128, c.layers = 2, c.heads = 4, c.channels = 32;
  return c;
}

// Prompt, then `count` tokens by the sampler; the logits of every step kept (rows of Vp).
std::vector<int> decode(model::KvDecoder& decoder, const std::vector<int>& prompt, int count,
                        const model::SamplingSettings& settings, const model::GptConfig& config,
                        std::vector<float>* logits_rows = nullptr) {
  decoder.reset();
  std::vector<int> tokens = prompt;
  const float* logits = nullptr;
  auto feed = [&](int token) {
    logits = decoder.step(token);
    if (logits_rows) logits_rows->insert(logits_rows->end(), logits, logits + config.padded_vocab);
  };
  for (int token : prompt) feed(token);
  for (int i = 0; i < count; ++i) {
    tokens.push_back(model::sample_token(logits, config.vocab, settings, decoder.position()));
    if (i + 1 < count) feed(tokens.back());
  }
  return tokens;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(generate)

// trident generate's memory check counts what the decoder allocates, to the byte: GPT-2's and a
// grouped-query Llama's, a cache of some positions and of the whole context (capacity 0 and past it).
BOOST_AUTO_TEST_CASE(decoder_bytes_are_what_it_allocates) {
  kernels::Context ctx;
  model::GptConfig llama = small_config();
  llama.arch = model::Arch::llama;
  llama.kv_heads = 2, llama.ffn_hidden = 40, llama.tie_embeddings = false;
  for (const model::GptConfig& config : {small_config(), llama})
    for (int capacity : {0, 7, 1000}) {
      const std::vector<float> params(static_cast<size_t>(model::num_parameters(config)), 0.0f);
      const int64_t before = trident::memory_usage().total_current();
      model::KvDecoder decoder(config, params.data(), ctx, capacity);
      BOOST_TEST(trident::memory_usage().total_current() - before == model::KvDecoder::buffer_bytes(config, capacity),
                 model::arch_name(config.arch) << ", capacity " << capacity);
    }
}

BOOST_AUTO_TEST_CASE(greedy_equals_argmax_of_the_full_forward) {
  kernels::Context ctx;
  const model::GptConfig config = small_config();
  model::Transformer gpt(config, ctx);
  model::init_params(config, gpt.params(), 11);
  for (int64_t i = 0; i < gpt.num_parameters(); ++i) gpt.params()[i] *= 8.0f;  // spread the logits: no near ties
  model::KvDecoder decoder(config, gpt.params(), ctx);
  const std::vector<int> prompt = {3, 17, 5, 42};
  std::vector<float> cached;  // (T − 1, Vp): the decoder's logits after each fed token
  const std::vector<int> tokens = decode(decoder, prompt, 16, {0.0f, 0, 1}, config, &cached);
  const int T = static_cast<int>(tokens.size());
  std::vector<int32_t> inputs(tokens.begin(), tokens.end());
  gpt.forward(inputs.data(), nullptr, 1, T);
  const float* full = gpt.logits();  // (T, Vp)
  float worst = 0.0f;
  for (int t = 0; t + 1 < T; ++t) {
    for (int v = 0; v < config.vocab; ++v)
      worst = std::max(worst, std::fabs(full[t * config.padded_vocab + v] - cached[t * config.padded_vocab + v]));
    if (t + 1 >= static_cast<int>(prompt.size()))
      BOOST_TEST(tokens[t + 1] == model::argmax(full + t * config.padded_vocab, config.vocab), "position " << t + 1);
  }
  BOOST_TEST(worst < 1e-4f);
  BOOST_TEST(decoder.position() == T - 1);
}

// The Llama family: a cache of the kv_heads key/value heads (grouped-query attention), keys
// rotated at their positions — with Llama 3.1's scaling, its three frequency regions reached by a
// head of 8 against an original context of 64 — RMSNorm, SwiGLU and an untied head: the cached
// logits are the full forward's at every position.
BOOST_AUTO_TEST_CASE(llama_cache_equals_the_full_forward) {
  kernels::Context ctx;
  model::GptConfig config = small_config();
  config.arch = model::Arch::llama;
  config.kv_heads = 2, config.ffn_hidden = 40, config.tie_embeddings = false, config.norm_eps = 1e-5f;
  config.rope_factor = 8.0f, config.rope_low_freq_factor = 1.0f, config.rope_high_freq_factor = 4.0f;
  config.rope_original_context = 64.0f;
  model::Transformer gpt(config, ctx);
  model::init_params(config, gpt.params(), 13);
  for (int64_t i = 0; i < gpt.num_parameters(); ++i) gpt.params()[i] *= 8.0f;
  model::KvDecoder decoder(config, gpt.params(), ctx, 20);  // a cache of 20 of the 24 positions
  BOOST_TEST(decoder.capacity() == 20);
  const std::vector<int> prompt = {9, 2, 33};
  std::vector<float> cached;
  const std::vector<int> tokens = decode(decoder, prompt, 17, {0.0f, 0, 1}, config, &cached);
  const int T = static_cast<int>(tokens.size());
  std::vector<int32_t> inputs(tokens.begin(), tokens.end());
  gpt.forward(inputs.data(), nullptr, 1, T);
  const float* full = gpt.logits();
  float worst = 0.0f, largest = 0.0f;
  for (int t = 0; t + 1 < T; ++t) {
    for (int v = 0; v < config.vocab; ++v) {
      worst = std::max(worst, std::fabs(full[t * config.padded_vocab + v] - cached[t * config.padded_vocab + v]));
      largest = std::max(largest, std::fabs(full[t * config.padded_vocab + v]));
    }
    if (t + 1 >= static_cast<int>(prompt.size()))
      BOOST_TEST(tokens[t + 1] == model::argmax(full + t * config.padded_vocab, config.vocab), "position " << t + 1);
  }
  BOOST_TEST(worst < 1e-5f * largest, "worst " << worst << " of logits up to " << largest);
  decoder.step(1);                                        // the 20th position
  BOOST_CHECK_THROW(decoder.step(1), std::out_of_range);  // the 21st: the cache is full
}

BOOST_AUTO_TEST_CASE(same_seed_same_tokens) {
  kernels::Context ctx;
  const model::GptConfig config = small_config();
  std::vector<float> params(static_cast<size_t>(model::num_parameters(config)));
  model::init_params(config, params.data(), 5);
  for (float& p : params) p *= 8.0f;
  model::KvDecoder decoder(config, params.data(), ctx);
  const std::vector<int> a = decode(decoder, {1, 2}, 20, {1.0f, 0, 7}, config);
  const std::vector<int> b = decode(decoder, {1, 2}, 20, {1.0f, 0, 7}, config);
  const std::vector<int> c = decode(decoder, {1, 2}, 20, {1.0f, 0, 8}, config);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  // top_k = 1 keeps the most likely token only: greedy.
  BOOST_TEST(decode(decoder, {1, 2}, 20, {1.0f, 1, 7}, config) == decode(decoder, {1, 2}, 20, {0.0f, 0, 7}, config));
  BOOST_CHECK_THROW(decoder.step(config.vocab), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(sampling_follows_the_tempered_softmax) {
  const float logits[4] = {0.0f, std::log(3.0f), -50.0f, std::log(2.0f)};  // p ∝ 1, 3, ~0, 2
  int counts[4] = {0, 0, 0, 0};
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++counts[model::sample_token(logits, 4, {1.0f, 0, 3}, i)];
  BOOST_TEST(std::fabs(counts[1] / double(draws) - 0.5) < 0.015);
  BOOST_TEST(std::fabs(counts[3] / double(draws) - 1.0 / 3) < 0.015);
  BOOST_TEST(counts[2] == 0);
  // Temperature 0.5 squares the odds (1 : 9 : 4); top_k = 2 drops the third most likely.
  int hot[4] = {0, 0, 0, 0}, top2[4] = {0, 0, 0, 0};
  for (int i = 0; i < draws; ++i) {
    ++hot[model::sample_token(logits, 4, {0.5f, 0, 3}, i)];
    ++top2[model::sample_token(logits, 4, {1.0f, 2, 3}, i)];
  }
  BOOST_TEST(std::fabs(hot[1] / double(draws) - 9.0 / 14) < 0.015);
  BOOST_TEST(top2[0] == 0);
  BOOST_TEST(std::fabs(top2[1] / double(draws) - 0.6) < 0.015);
  BOOST_TEST(model::sample_token(logits, 4, {0.0f, 0, 3}, 0) == 1);
}

BOOST_AUTO_TEST_SUITE_END()
