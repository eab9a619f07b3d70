// Hugging Face files (model/safetensors.hpp, model/hf_gpt2.hpp): every dtype back as written
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
#include "model/hf_gpt2.hpp"
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
  std::vector<float> whole(static_cast<size_t>(model::num_parameters(c)));
  model::init_params(c, whole.data(), 7);
  // wte's padded rows are not in the file (its V rows are): zero, as a model reads them.
  const auto offsets = model::param_offsets(c);
  for (int64_t i = int64_t(c.vocab) * c.channels; i < int64_t(c.padded_vocab) * c.channels; ++i) whole[offsets[0] + i] = 0;
  model::write_hf_gpt2(tmp.dir, c, whole.data(), DType::f32, 8000);  // shards of at most 8 kB
  BOOST_TEST(std::filesystem::exists(tmp.dir + "/model.safetensors.index.json"));
  std::vector<model::Partition> parts;
  for (int p : {1, 2, 4})
    for (int r = 0; r < p; ++r) {
      parts.push_back(model::stage_partition({4}, 0, r, p));
      for (int s = 0; s < 2; ++s) parts.push_back(model::stage_partition({1, 3}, s, r, p));
      for (int s = 0; s < 2; ++s) parts.push_back(model::interleaved_partition({1, 1, 1, 1}, 2, s, r, p));
    }
  for (const model::Partition& part : parts) {
    std::vector<float> expected(static_cast<size_t>(model::num_parameters(c, part))), read(expected.size(), -1.0f);
    model::extract_slice(c, whole.data(), expected.data(), part);
    model::read_hf_gpt2_slice(tmp.dir, c, part, read.data());
    BOOST_TEST(read == expected, "rank " << part.rank << " of " << part.size << ", blocks from " << part.first_layer);
  }
}

BOOST_AUTO_TEST_CASE(config_json_round_trips) {
  TempDir tmp;
  const model::GptConfig c = tiny();
  std::vector<float> whole(static_cast<size_t>(model::num_parameters(c)), 0.5f);
  model::write_hf_gpt2(tmp.dir, c, whole.data(), DType::bf16);
  const model::GptConfig back = model::read_hf_gpt2_config(tmp.dir);
  BOOST_TEST(back.layers == c.layers);
  BOOST_TEST(back.heads == c.heads);
  BOOST_TEST(back.channels == c.channels);
  BOOST_TEST(back.vocab == c.vocab);
  BOOST_TEST(back.padded_vocab == c.padded_vocab);
  BOOST_TEST(back.max_seq_len == c.max_seq_len);
  BOOST_TEST(model::is_hf_directory(tmp.dir));
  BOOST_TEST(!model::is_hf_directory(tmp.dir + "/model.safetensors"));
}

BOOST_AUTO_TEST_SUITE_END()
