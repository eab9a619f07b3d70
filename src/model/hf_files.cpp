// Hugging Face model directories: the index, the shards, config.json.
#include "model/hf_files.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "core/file_util.hpp"

namespace trident::model {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxJsonBytes = size_t(64) << 20;  // an index of a few thousand names is well under 1 MB

JsonLookup read_json_file(const std::string& path, const std::string& expected) {
  std::string text, why;
  if (!read_file(path, kMaxJsonBytes, text, why)) throw std::runtime_error(path + ": " + why);
  return parse_json_lookup(path, text, expected);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A file name the index may give: a plain name in the directory, never a path out of it.
bool plain_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

}  // namespace

bool is_hf_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ::stat((path + "/" + kHfConfig).c_str(), &st) == 0;
}

JsonLookup read_hf_config(const std::string& dir) {
  const JsonLookup config = read_json_file(dir + "/" + kHfConfig, "expected a Hugging Face config.json (a JSON object)");
  if (!config.is_object()) throw std::runtime_error(dir + "/" + kHfConfig + ": not a JSON object");
  return config;
}

HfTensors::HfTensors(const std::string& dir) : dir_(dir) {
  const std::string index = dir + "/" + kHfIndex, single = dir + "/" + kHfSingleFile;
  if (regular_file_problem(index).empty()) {
    const JsonLookup j = read_json_file(index, "expected {\"weight_map\": {TENSOR: FILE}}");
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw std::runtime_error(index + ": no \"weight_map\" object (expected {\"weight_map\": {TENSOR: FILE}})");
    std::map<std::string, size_t> opened;  // file -> index in files_
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || !plain_name(file.get<std::string>()))
        throw std::runtime_error(index + ": tensor '" + name + "' maps to " + file.dump() +
                                 ", not the name of a file in the directory");
      const std::string f = file.get<std::string>();
      if (!opened.count(f)) {
        files_.push_back(std::make_unique<SafetensorsReader>(dir + "/" + f));
        opened[f] = files_.size() - 1;
      }
      if (files_[opened[f]]->find(name) == nullptr)
        throw std::runtime_error(index + ": tensor '" + name + "' is mapped to " + f + ", which does not hold it");
      where_[name] = opened[f];
    }
    return;
  }
  if (!regular_file_problem(single).empty()) {
    const bool pickled = fs::exists(dir + "/pytorch_model.bin");
    throw std::runtime_error(dir + ": holds neither " + kHfSingleFile + " nor " + kHfIndex +
                             (pickled ? " (pytorch_model.bin is a pickle, which Trident does not read: save it with "
                                        "safe_serialization=True)"
                                      : ""));
  }
  files_.push_back(std::make_unique<SafetensorsReader>(single));
  for (const SafeTensor& t : files_[0]->tensors()) where_[t.name] = 0;
}

const SafetensorsReader& HfTensors::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw std::runtime_error(dir_ + ": no tensor '" + name + "' in the model's files");
  return *files_[it->second];
}

const SafeTensor& HfTensors::get(const std::string& name, const std::vector<int64_t>& shape) const {
  const SafetensorsReader& file = file_of(name);
  const SafeTensor& t = *file.find(name);
  if (t.shape != shape)
    throw std::runtime_error(file.path() + ": tensor '" + name + "' has shape " + shape_text(t.shape) +
                             ", the model needs " + shape_text(shape));
  return t;
}

void HfTensors::read(const std::string& name, int64_t first, int64_t count, float* out) const {
  const SafetensorsReader& file = file_of(name);
  file.read(*file.find(name), first, count, out);
}

std::vector<std::string> HfTensors::names() const {
  std::vector<std::string> all;
  for (const auto& [name, file] : where_) all.push_back(name);
  return all;
}

std::vector<std::string> write_hf_tensors(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                                          DType dtype, int64_t max_shard_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create the directory: " + ec.message());
  std::vector<std::vector<TensorToWrite>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const TensorToWrite& t : tensors) {
    const int64_t bytes = stored_bytes(t, dtype);
    if (in_shard > 0 && in_shard + bytes > max_shard_bytes) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(t);
    in_shard += bytes, total += bytes;
  }
  if (shards.size() == 1) {
    write_safetensors(dir + "/" + kHfSingleFile, tensors, dtype);
    return {kHfSingleFile};
  }
  std::vector<std::string> files;
  Json weight_map = Json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    write_safetensors(dir + "/" + name, shards[k], dtype);
    files.push_back(name);
    for (const TensorToWrite& t : shards[k]) weight_map[t.name] = name;
  }
  const Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  const std::string problem = write_atomically(dir + "/" + kHfIndex, {{text.data(), text.size()}});
  if (!problem.empty()) throw std::runtime_error(problem);
  files.push_back(kHfIndex);
  return files;
}

void write_hf_config(const std::string& dir, const Json& config) {
  const std::string text = config.dump(2) + "\n";
  const std::string problem = write_atomically(dir + "/" + kHfConfig, {{text.data(), text.size()}});
  if (!problem.empty()) throw std::runtime_error(problem);
}

}  // namespace trident::model
