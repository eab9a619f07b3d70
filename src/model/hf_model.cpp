// Our parameters into and out of a Hugging Face directory, by the architecture's tables.
#include "model/hf_model.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

#include "model/hf_architectures.hpp"

namespace trident::model {
namespace {

HfArchitecture architecture_of(const HfTensors& files, const GptConfig& config) {
  return hf_architecture(config, hf_gpt2_prefix([&files](const std::string& name) { return files.has(name); }));
}

}  // namespace

GptConfig read_hf_model_config(const std::string& dir) {
  return hf_config_from_json(read_hf_config(dir), dir + "/" + kHfConfig);
}

const char* hf_class_name(const GptConfig& config) { return hf_architecture(config, "").class_name; }

std::vector<std::string> write_hf_model(const std::string& dir, const GptConfig& config, const float* params,
                                        DType dtype, int64_t max_shard_bytes) {
  const auto offsets = param_offsets(config);
  const auto specs = param_specs(config);
  std::vector<TensorToWrite> tensors;
  for (const HfTensor& h : hf_architecture(config, "transformer.").tensors) {
    const int64_t per_layer = h.per_block ? specs[h.tensor].count() / config.layers : 0;
    const float* ours = params + offsets[h.tensor] + h.layer * per_layer;
    tensors.push_back({h.name, h.shape(), [h, ours](float* out) {
                         for (int64_t r = h.first_row; r < h.first_row + h.rows; ++r)
                           for (int64_t c = 0; c < h.cols; ++c) out[h.index(r, c)] = ours[r * h.cols + c];
                       }});
  }
  std::vector<std::string> files = write_hf_tensors(dir, tensors, dtype, max_shard_bytes);
  write_hf_config(dir, hf_config_json(config, dtype));  // last: a directory with config.json is complete
  return files;
}

void check_hf_model_files(const std::string& dir, const GptConfig& config) {
  const HfTensors files(dir);
  const HfArchitecture a = architecture_of(files, config);
  std::set<std::string> known;
  for (const HfTensor& h : a.tensors) {
    known.insert(h.name);
    files.get(h.name, h.shape());
  }
  for (const std::string& name : files.names())
    if (!known.count(name) && !a.skipped(name))
      throw std::runtime_error(files.dir() + ": tensor '" + name + "' is not one of " + a.class_name + "'s for " +
                               std::to_string(config.layers) + " blocks" +
                               (name == "lm_head.weight" ? " with tied embeddings (tie_word_embeddings)" : ""));
}

// Each of our tensors in parts of one block (or all of it); of each part, the elements that each
// file tensor of that block holds, read as one range of the file tensor from its lowest index to
// its highest (rows of the file's matrix: contiguous where not transposed).
void read_hf_model_slice(const std::string& dir, const GptConfig& config, const Partition& slice, float* local) {
  const HfTensors files(dir);
  const HfArchitecture a = architecture_of(files, config);
  const auto specs = param_specs(config, slice), whole = param_specs(config);
  std::vector<float> block;
  int64_t at = 0;
  for (int t = 0; t < kNumParamTensors; ++t) {
    const int64_t n = specs[t].count();
    if (n == 0) continue;
    const bool per_block = is_block_tensor(t);
    const int64_t parts = per_block ? slice.layers(config) : 1, per = n / parts;
    const int64_t matrix = per_block ? whole[t].count() / config.layers : whole[t].count();
    std::fill(local + at, local + at + n, 0.0f);  // wte's and the head's padded rows: in no file tensor
    for (int64_t part = 0; part < parts; ++part) {
      const int64_t first = part * per;  // this part's local elements: [first, first + per)
      const int64_t layer = per_block ? global_index(config, slice, t, first) / matrix : 0;
      float* out = local + at + first;
      for (const HfTensor& h : a.tensors) {
        if (h.tensor != t || h.layer != layer) continue;
        files.get(h.name, h.shape());
        // Element i of the part, at row r and column c of our matrix: in h when r is one of h's rows.
        auto index_of = [&](int64_t i) -> int64_t {
          const int64_t w = global_index(config, slice, t, first + i) - layer * matrix, r = w / h.cols;
          return r >= h.first_row && r < h.first_row + h.rows ? h.index(r, w % h.cols) : -1;
        };
        int64_t low = std::numeric_limits<int64_t>::max(), high = -1;
#pragma omp parallel for reduction(min : low) reduction(max : high)
        for (int64_t i = 0; i < per; ++i)
          if (const int64_t k = index_of(i); k >= 0) low = std::min(low, k), high = std::max(high, k);
        if (high < 0) continue;  // none of this rank's elements
        block.resize(static_cast<size_t>(high - low + 1));
        files.read(h.name, low, high - low + 1, block.data());
#pragma omp parallel for
        for (int64_t i = 0; i < per; ++i)
          if (const int64_t k = index_of(i); k >= 0) out[i] = block[static_cast<size_t>(k - low)];
      }
    }
    at += n;
  }
}

}  // namespace trident::model
