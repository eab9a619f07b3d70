// The datasets of a checkpoint file.
#include "ckpt/datasets.hpp"

#include <algorithm>
#include <filesystem>

#include "model/params.hpp"

namespace trident::ckpt {
namespace {

using h5::Handle;
const char* const kSections[] = {"params", "adamw_m", "adamw_v"};

// A dataset the metadata promises, as stored: reached through hard links only (an external or
// soft link would make HDF5 open another file, which may be a FIFO that blocks for ever),
// float32, contiguous in this file (no external raw-data files, no virtual dataset) and all of
// its bytes there: a shape is believed only when the file holds its data. `bytes` adds its size.
std::string dataset_problem(hid_t file, const std::string& name, const std::vector<int64_t>& shape, int64_t& bytes) {
  for (size_t slash = name.find('/'); ; slash = name.find('/', slash + 1)) {
    const std::string link = name.substr(0, slash);
    H5L_info_t info{};
    if (H5Lexists(file, link.c_str(), H5P_DEFAULT) <= 0) return "no dataset '" + name + "'";
    if (H5Lget_info(file, link.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
      return "'" + link + "' is a " + (info.type == H5L_TYPE_EXTERNAL ? "link to another file" : "soft link") +
             ", not an object of this file (trident writes none)";
    if (slash == std::string::npos) break;
  }
  Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) return "'" + name + "' is not a dataset";
  Handle type(H5Dget_type(dataset.get())), space(H5Dget_space(dataset.get())), create(H5Dget_create_plist(dataset.get()));
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    return "dataset '" + name + "' is not float32";
  std::vector<hsize_t> dims(shape.size(), 0);
  if (H5Sget_simple_extent_ndims(space.get()) != static_cast<int>(dims.size()) ||
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0 ||
      !std::equal(dims.begin(), dims.end(), shape.begin(), [](hsize_t a, int64_t b) { return a == static_cast<hsize_t>(b); }))
    return "dataset '" + name + "' does not have the shape its metadata gives the model";
  if (H5Pget_layout(create.get()) != H5D_CONTIGUOUS || H5Pget_external(create.get(), 0, 0, nullptr, nullptr, nullptr) >= 0)
    return "dataset '" + name + "' is not stored contiguously in the file (trident writes nothing else)";
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (static_cast<int64_t>(H5Dget_storage_size(dataset.get())) != elements * 4)
    return "dataset '" + name + "' holds " + std::to_string(H5Dget_storage_size(dataset.get())) + " bytes, not the " +
           std::to_string(elements * 4) + " of its shape";
  bytes += elements * 4;
  return "";
}

}  // namespace

std::string dataset_name(const model::GptConfig& config, int section, int tensor) {
  return std::string(kSections[section]) + "/" + model::param_specs(config)[tensor].name;
}

bool has_dataset(const model::GptConfig& config, int tensor) { return model::param_specs(config)[tensor].count() > 0; }

int sections_of(const std::string& kind) { return kind == "full" ? 3 : 1; }

std::string storage_problem(hid_t file, const std::string& path, const Metadata& metadata) {
  h5::Lock lock(h5::hdf5_mutex());
  int64_t bytes = 0;
  for (const auto& [name, shape] : checkpoint_datasets(metadata.model, metadata.kind)) {
    const std::string problem = dataset_problem(file, name, shape, bytes);
    if (!problem.empty()) return problem;
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && bytes > static_cast<int64_t>(size))
    return "its datasets would take " + std::to_string(bytes) + " bytes but the file has " + std::to_string(size);
  return "";
}

std::vector<std::pair<std::string, std::vector<int64_t>>> checkpoint_datasets(const model::GptConfig& config,
                                                                              const std::string& kind) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> result;
  const auto specs = model::param_specs(config);
  for (int section = 0; section < sections_of(kind); ++section)
    for (int t = 0; t < model::kNumParamTensors; ++t)
      if (specs[t].count() > 0) result.emplace_back(dataset_name(config, section, t), specs[t].shape);
  return result;
}

}  // namespace trident::ckpt
