// Reading and atomically replacing metrics.h5.
#include "metrics/snapshot.hpp"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/file_util.hpp"
#include "core/h5.hpp"

namespace trident::metrics {
namespace {

constexpr const char* kIdAttribute = "metrics_snapshot_id";
constexpr hsize_t kChunk = 1024;

std::runtime_error snapshot_error(const std::string& path, const std::string& what) {
  return std::runtime_error("metrics file '" + path + "': " + what);
}

herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* names) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

Series read_dataset(hid_t file, const std::string& path, const std::string& name) {
  h5::Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  h5::Handle space(dataset.valid() ? H5Dget_space(dataset.get()) : -1);
  if (!space.valid() || H5Sget_simple_extent_ndims(space.get()) != 1)
    throw snapshot_error(path, "dataset '" + name + "' is not a series");
  hsize_t rows = 0;
  H5Sget_simple_extent_dims(space.get(), &rows, nullptr);
  h5::Handle type(H5Dget_type(dataset.get()));
  Series series;
  series.integer = H5Tget_class(type.get()) == H5T_INTEGER;
  series.resize(rows);
  void* values = series.integer ? static_cast<void*>(series.ints.data()) : series.real.data();
  if (rows && H5Dread(dataset.get(), series.integer ? H5T_NATIVE_LLONG : H5T_NATIVE_DOUBLE, H5S_ALL,
                      H5S_ALL, H5P_DEFAULT, values) < 0)
    throw snapshot_error(path, "reading dataset '" + name + "' failed");
  return series;
}

void read_attributes(hid_t file, History& history) {
  std::vector<std::string> names;
  H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_attribute, &names);
  for (const std::string& name : names) {
    std::string value;
    if (!h5::read_string_attribute(file, name, value)) continue;  // only ours, all strings
    if (name == kIdAttribute) history.snapshot_id = value;
    else history.attributes.emplace_back(name, value);
  }
}

void write_dataset(hid_t file, const std::string& path, const std::string& name, const Series& series) {
  const hsize_t rows = series.size(), maximum = H5S_UNLIMITED;
  h5::Handle space(H5Screate_simple(1, &rows, &maximum));
  h5::Handle properties(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(properties.get(), 1, &kChunk);  // extendable, as h5py users may expect
  h5::Handle links(H5Pcreate(H5P_LINK_CREATE));  // "stage1/forward_ms": groups made as needed
  H5Pset_create_intermediate_group(links.get(), 1);
  h5::Handle dataset(H5Dcreate2(file, name.c_str(), series.integer ? H5T_STD_I64LE : H5T_IEEE_F64LE,
                                space.get(), links.get(), properties.get(), H5P_DEFAULT));
  if (!dataset.valid()) throw snapshot_error(path, "creating dataset '" + name + "' failed");
  const void* values = series.integer ? static_cast<const void*>(series.ints.data()) : series.real.data();
  if (rows && H5Dwrite(dataset.get(), series.integer ? H5T_NATIVE_LLONG : H5T_NATIVE_DOUBLE, H5S_ALL,
                       H5S_ALL, H5P_DEFAULT, values) < 0)
    throw snapshot_error(path, "writing dataset '" + name + "' failed");
}

void write_file(const std::string& path, const History& history) {
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file.valid()) throw snapshot_error(path, "cannot create");
  for (const auto& [name, value] : history.attributes)
    if (!h5::write_string_attribute(file.get(), name, value))
      throw snapshot_error(path, "writing attribute '" + name + "' failed");
  if (!h5::write_string_attribute(file.get(), kIdAttribute, history.snapshot_id))
    throw snapshot_error(path, "writing attribute '" + std::string(kIdAttribute) + "' failed");
  for (const auto& [name, series] : history.series) write_dataset(file.get(), path, name, series);
  if (H5Fclose(file.release()) < 0) throw snapshot_error(path, "closing failed");
}

// A generous bound on the snapshot's size: whole chunks of every series, a kilobyte of metadata
// per dataset and per attribute, the attributes' text, and 64 KiB besides.
double snapshot_bytes(const History& history) {
  double bytes = 65536;
  for (const auto& [name, value] : history.attributes) bytes += 1024 + static_cast<double>(name.size() + value.size());
  for (const auto& [name, series] : history.series)
    bytes += 1024 + 8.0 * static_cast<double>(kChunk) * static_cast<double>((series.size() + kChunk - 1) / kChunk);
  return bytes;
}

// HDF5 does not recover from a write that fails for lack of space: the objects of the failed
// file stay open, and HDF5's shutdown inside MPI_Finalize crashes on them (a full tmpfs showed
// it). So a full disk is caught here, before HDF5 writes anything, as the checkpoints do.
void check_space(const std::string& path, const History& history) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  struct statvfs info {};
  if (::statvfs(directory.empty() ? "." : directory.c_str(), &info) != 0) return;  // cannot tell: let the write find out
  const double available = static_cast<double>(info.f_bavail) * static_cast<double>(info.f_frsize);
  const double needed = snapshot_bytes(history);
  if (available >= needed) return;
  char text[160];
  std::snprintf(text, sizeof text, "not enough space: writing it needs about %.2f MB, %.2f MB are free", needed / 1e6,
                available / 1e6);
  throw snapshot_error(path, text);
}

}  // namespace

History read_snapshot(const std::string& path) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) throw snapshot_error(path, "cannot open");
  std::vector<std::string> names;
  if (H5Ovisit(file.get(), H5_INDEX_NAME, H5_ITER_NATIVE, collect_dataset, &names) < 0)
    throw snapshot_error(path, "cannot list its datasets");
  History history;
  for (const std::string& name : names) history.series[name] = read_dataset(file.get(), path, name);
  read_attributes(file.get(), history);
  return history;
}

void write_snapshot(const std::string& path, const History& history) {
  check_space(path, history);
  const std::string temporary = path + ".tmp";
  try {
    h5::Lock lock(h5::hdf5_mutex());
    h5::quiet_errors();
    write_file(temporary, history);
    const std::string problem = sync_to_disk(temporary);
    if (!problem.empty()) throw snapshot_error(path, problem);
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
  const std::string problem = rename_into_place(temporary, path);
  if (!problem.empty()) throw snapshot_error(path, problem);
}

std::string new_snapshot_id() {
  static unsigned counter = 0;
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::string(host) + ":" + std::to_string(getpid()) + ":" +
         std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()) + ":" +
         std::to_string(++counter);
}

}  // namespace trident::metrics
