// A Hugging Face model directory, as transformers' save_pretrained writes it and
// from_pretrained reads it: config.json, and the tensors in model.safetensors — or, above a size
// limit, in shards model-0000K-of-0000N.safetensors that model.safetensors.index.json maps every
// tensor name to ({"metadata": {"total_size": BYTES}, "weight_map": {NAME: FILE}}).
// The architecture's names, shapes and config keys are its own file's (model/hf_architectures.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "model/safetensors.hpp"

namespace trident::model {

constexpr const char* kHfConfig = "config.json";
constexpr const char* kHfSingleFile = "model.safetensors";
constexpr const char* kHfIndex = "model.safetensors.index.json";
// save_pretrained's default shard size ("5GB").
constexpr int64_t kHfDefaultShardBytes = 5'000'000'000;

// A directory holding config.json: what model.init names to load a Hugging Face model.
bool is_hf_directory(const std::string& path);

// DIR/config.json parsed (an object), or std::runtime_error naming the file.
JsonLookup read_hf_config(const std::string& dir);

// The tensors of a model directory, every file's header checked on opening.
class HfTensors {
 public:
  // Throws std::runtime_error naming the directory or the file: neither model.safetensors nor an
  // index, an index that is not {"weight_map": {NAME: FILE}} or names a file outside the
  // directory, a file whose header is bad, a tensor the index maps to a file that lacks it.
  explicit HfTensors(const std::string& dir);
  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const { return where_.count(name) > 0; }
  // The tensor `name`, checked to have `shape`; std::runtime_error naming it (and the file)
  // when it is missing or shaped otherwise.
  const SafeTensor& get(const std::string& name, const std::vector<int64_t>& shape) const;
  // Elements [first, first + count) of tensor `name` (flat) as f32.
  void read(const std::string& name, int64_t first, int64_t count, float* out) const;
  std::vector<std::string> names() const;  // every tensor, sorted

 private:
  const SafetensorsReader& file_of(const std::string& name) const;
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, size_t> where_;  // tensor -> index in files_
};

// Writes the tensors into DIR (created if missing) as one model.safetensors, or, when they take
// more than max_shard_bytes, as shards of at most that (a larger tensor alone in its shard) and
// the index; each file written aside and renamed. Returns the files written, in order.
std::vector<std::string> write_hf_tensors(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                                          DType dtype, int64_t max_shard_bytes = kHfDefaultShardBytes);
// DIR/config.json (aside, then renamed), indented as transformers writes it.
void write_hf_config(const std::string& dir, const Json& config);

}  // namespace trident::model
