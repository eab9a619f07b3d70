// Hugging Face files (model/safetensors.hpp, model/hf_model.hpp): every dtype back as written
// (f32 exactly, 16-bit as the rounding gives), and every rank's slice of a directory — tensor
// slices, pipeline stages, interleaved chunks — the elements extract_slice cuts from the whole.
#define BOOST_TEST_DYN_LINK
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/wrappers/widen.hpp"
#include "model/hf_model.hpp"
#include "model/params.hpp"
#include "model/safetensors.hpp"

namespace model = trident::model;
using trident::DType;

namespace {

struct TempDir {
  std::string dir;
  TempDir() {
    char pattern[] = "/tmp/trident-hf.XXXXXX";
    dir = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
};

model::GptConfig tiny() {
  model::GptConfig c;
  c.max_seq_len = 16, c.vocab = 200, c.padded_vocab = model::padded_vocab_for(200);
  c.layers = 4, c.heads = 4, c.channels = 16;
  return c;
}

// Grouped-query attention (2 key/value heads of 4), SwiGLU, untied or tied head.
model::GptConfig tiny_llama(bool tied) {
  model::GptConfig c = tiny();
  c.arch = model::Arch::llama;
  c.kv_heads = 2, c.ffn_hidden = 24, c.tie_embeddings = tied, c.rope_theta = 500000.0f, c.norm_eps = 1e-5f;
  return c;
}

// The whole model with its padded vocabulary rows zero (they are in no file).
std::vector<float> whole_model(const model::GptConfig& c, uint64_t seed) {
  std::vector<float> whole(static_cast<size_t>(model::num_parameters(c)));
  model::init_params(c, whole.data(), seed);
  const auto offsets = model::param_offsets(c);
  const auto specs = model::param_specs(c);
  for (int t : {model::kWte, model::kHead})
    if (specs[t].count() > 0)
      for (int64_t i = int64_t(c.vocab) * c.channels; i < int64_t(c.padded_vocab) * c.channels; ++i)
        whole[offsets[t] + i] = 0;
  return whole;
}

// Every tensor rank of 1, 2 and 4 at every stage of two splits and of an interleaved one.
std::vector<model::Partition> every_partition() {
  std::vector<model::Partition> parts;
  for (int p : {1, 2, 4})
    for (int r = 0; r < p; ++r) {
      parts.push_back(model::stage_partition({4}, 0, r, p));
      for (int s = 0; s < 2; ++s) parts.push_back(model::stage_partition({1, 3}, s, r, p));
      for (int s = 0; s < 2; ++s) parts.push_back(model::interleaved_partition({1, 1, 1, 1}, 2, s, r, p));
    }
  return parts;
}

void expect_every_slice(const std::string& dir, const model::GptConfig& c, const std::vector<float>& whole,
                        const std::vector<model::Partition>& parts) {
  for (const model::Partition& part : parts) {
    std::vector<float> expected(static_cast<size_t>(model::num_parameters(c, part))), read(expected.size(), -1.0f);
    model::extract_slice(c, whole.data(), expected.data(), part);
    model::read_hf_model_slice(dir, c, part, read.data());
    BOOST_TEST(read == expected, "rank " << part.rank << " of " << part.size << ", blocks from " << part.first_layer);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hf_files)

BOOST_AUTO_TEST_CASE(safetensors_every_dtype_round_trips) {
  TempDir tmp;
  std::vector<float> values(3 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(1.0f + i) * 1000.0f;
  for (DType dtype : {DType::f32, DType::bf16, DType::fp16}) {
    const std::string path = tmp.dir + "/t.safetensors";
    model::write_safetensors(path, {{"a.weight", {3, 5}, [&](float* out) { std::copy(values.begin(), values.end(), out); }},
                                    {"b", {2}, [](float* out) { out[0] = 1, out[1] = -2; }}},
                             dtype);
    const model::SafetensorsReader file(path);
    BOOST_REQUIRE_EQUAL(file.tensors().size(), 2u);
    const model::SafeTensor* a = file.find("a.weight");
    BOOST_REQUIRE(a != nullptr);
    BOOST_TEST(a->shape == (std::vector<int64_t>{3, 5}));
    BOOST_TEST(a->begin % 8 == 0);  // the data after an 8-byte-aligned header
    std::vector<float> back(values.size()), expected = values;
    if (dtype != DType::f32) {  // rounded to nearest even, as the kernels store 16-bit values
      std::vector<uint16_t> low(values.size());
      trident::comm::narrow(dtype, values.data(), low.data(), low.size());
      trident::comm::widen(dtype, low.data(), expected.data(), low.size());
    }
    file.read(*a, 0, a->count(), back.data());
    BOOST_TEST(back == expected);
    float middle[4];
    file.read(*a, 6, 4, middle);  // a range from inside
    BOOST_TEST(std::vector<float>(middle, middle + 4) == std::vector<float>(expected.begin() + 6, expected.begin() + 10));
    BOOST_TEST(file.metadata().at("format") == "pt");
  }
}

BOOST_AUTO_TEST_CASE(every_slice_reads_what_extract_slice_cuts) {
  TempDir tmp;
  const model::GptConfig c = tiny();
  const std::vector<float> whole = whole_model(c, 7);
  model::write_hf_model(tmp.dir, c, whole.data(), DType::f32, 8000);  // shards of at most 8 kB
  BOOST_TEST(std::filesystem::exists(tmp.dir + "/model.safetensors.index.json"));
  expect_every_slice(tmp.dir, c, whole, every_partition());
}

// LlamaForCausalLM: q, k and v are three file tensors of our one fused matrix, gate and up two;
// every slice (the 2 key/value heads split over 1 and 2 tensor ranks, each on two of 4) reads
// what extract_slice cuts, tied and untied.
BOOST_AUTO_TEST_CASE(llama_slices_read_what_extract_slice_cuts) {
  for (bool tied : {false, true}) {
    TempDir tmp;
    const model::GptConfig c = tiny_llama(tied);
    const std::vector<float> whole = whole_model(c, 9);
    model::write_hf_model(tmp.dir, c, whole.data(), DType::f32, 6000);
    model::check_hf_model_files(tmp.dir, c);
    const model::HfTensors files(tmp.dir);
    BOOST_TEST(files.has("model.layers.3.self_attn.k_proj.weight"));
    BOOST_TEST(files.get("model.layers.0.self_attn.k_proj.weight", {8, 16}).count() == 128);  // 2 heads of 4
    BOOST_TEST(files.get("model.layers.0.mlp.gate_proj.weight", {24, 16}).count() == 24 * 16);
    BOOST_TEST(files.has("lm_head.weight") == !tied);
    BOOST_TEST(!files.has("model.layers.0.self_attn.q_proj.bias"));
    expect_every_slice(tmp.dir, c, whole, every_partition());  // on 4 ranks each head on two
    // Our wqkv's rows [C, C + 8) are k_proj's, in order.
    const auto offsets = model::param_offsets(c);
    std::vector<float> k(8 * 16);
    files.read("model.layers.1.self_attn.k_proj.weight", 0, 128, k.data());
    const int64_t rows = model::qkv_rows(c);
    BOOST_TEST(std::equal(k.begin(), k.end(), whole.begin() + offsets[model::kQkvw] + (rows + 16) * 16));
  }
}

BOOST_AUTO_TEST_CASE(config_json_round_trips) {
  TempDir tmp;
  const model::GptConfig c = tiny();
  std::vector<float> whole(static_cast<size_t>(model::num_parameters(c)), 0.5f);
  model::write_hf_model(tmp.dir, c, whole.data(), DType::bf16);
  const model::GptConfig back = model::read_hf_model_config(tmp.dir);
  BOOST_TEST(back.layers == c.layers);
  BOOST_TEST(back.heads == c.heads);
  BOOST_TEST(back.channels == c.channels);
  BOOST_TEST(back.vocab == c.vocab);
  BOOST_TEST(back.padded_vocab == c.padded_vocab);
  BOOST_TEST(back.max_seq_len == c.max_seq_len);
  BOOST_TEST(model::is_hf_directory(tmp.dir));
  BOOST_TEST(!model::is_hf_directory(tmp.dir + "/model.safetensors"));
}

BOOST_AUTO_TEST_CASE(llama_config_json_round_trips) {
  TempDir tmp;
  model::GptConfig c = tiny_llama(false);
  c.rope_factor = 8.0f, c.rope_low_freq_factor = 1.0f, c.rope_high_freq_factor = 4.0f, c.rope_original_context = 8192.0f;
  std::vector<float> whole(static_cast<size_t>(model::num_parameters(c)), 0.25f);
  model::write_hf_model(tmp.dir, c, whole.data(), DType::f32);
  const model::GptConfig back = model::read_hf_model_config(tmp.dir);
  BOOST_TEST(model::is_llama(back));
  BOOST_TEST(back.kv_heads == 2);
  BOOST_TEST(back.ffn_hidden == 24);
  BOOST_TEST(!back.tie_embeddings);
  BOOST_TEST(back.rope_theta == 500000.0f);
  BOOST_TEST(back.norm_eps == 1e-5f);
  BOOST_TEST(back.rope_factor == 8.0f);
  BOOST_TEST(back.rope_low_freq_factor == 1.0f);
  BOOST_TEST(back.rope_high_freq_factor == 4.0f);
  BOOST_TEST(back.rope_original_context == 8192.0f);
  BOOST_TEST(back.max_seq_len == c.max_seq_len);
  BOOST_TEST(std::string(model::hf_class_name(back)) == "LlamaForCausalLM");
}

BOOST_AUTO_TEST_SUITE_END()
