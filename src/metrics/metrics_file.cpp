// HDF5 time series.
#include "metrics/metrics_file.hpp"

#include <stdexcept>

namespace trident::metrics {
namespace {

constexpr hsize_t kChunk = 1024;

std::runtime_error h5_error(const std::string& path, const std::string& what) {
  return std::runtime_error("metrics file '" + path + "': " + what);
}

void check(herr_t status, const std::string& path, const std::string& what) {
  if (status < 0) throw h5_error(path, what + " failed");
}

// Variable-length UTF-8 strings: h5py reads them as str, h5dump prints them as text.
hid_t string_type() {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  return type;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value,
                            const std::string& path) {
  const hid_t type = string_type();
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* text = value.c_str();
  const herr_t status = attribute < 0 ? -1 : H5Awrite(attribute, type, &text);
  if (attribute >= 0) H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
  check(status, path, "writing attribute '" + name + "'");
}

hid_t create_series(hid_t file, const std::string& name, bool integer, const std::string& path) {
  const hsize_t initial = 0, maximum = H5S_UNLIMITED;
  const hid_t space = H5Screate_simple(1, &initial, &maximum);
  const hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(properties, 1, &kChunk);
  const hid_t links = H5Pcreate(H5P_LINK_CREATE);  // "stage1/forward_ms": groups made as needed
  H5Pset_create_intermediate_group(links, 1);
  const hid_t dataset = H5Dcreate2(file, name.c_str(), integer ? H5T_STD_I64LE : H5T_IEEE_F64LE,
                                   space, links, properties, H5P_DEFAULT);
  H5Pclose(links);
  H5Pclose(properties);
  H5Sclose(space);
  if (dataset < 0) throw h5_error(path, "creating dataset '" + name + "' failed");
  return dataset;
}

}  // namespace

MetricsFile::MetricsFile(const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& attributes)
    : path_(path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our messages, not HDF5's stack dumps
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) throw h5_error(path, "cannot create");
  const hid_t root = H5Gopen2(file_, "/", H5P_DEFAULT);
  for (const auto& [name, value] : attributes) write_string_attribute(root, name, value, path);
  H5Gclose(root);
  check(H5Fflush(file_, H5F_SCOPE_GLOBAL), path, "flush");
}

MetricsFile::~MetricsFile() {
  if (file_ < 0) return;
  try {
    flush();
  } catch (const std::exception&) {
    // Destructors must not throw; the last flush's failure was reported by the caller's flush.
  }
  H5Fclose(file_);
}

void MetricsFile::append(const std::string& name, double value) {
  Series& series = series_[name];
  series.pending_real.push_back(value);
}

void MetricsFile::append_int(const std::string& name, long long value) {
  Series& series = series_[name];
  series.integer = true;
  series.pending_int.push_back(value);
}

void MetricsFile::write_series(const std::string& name, Series& series) {
  const hsize_t count = series.integer ? series.pending_int.size() : series.pending_real.size();
  if (count == 0) return;
  hid_t dataset = series.written == 0 ? create_series(file_, name, series.integer, path_)
                                      : H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
  if (dataset < 0) throw h5_error(path_, "opening dataset '" + name + "' failed");
  const hsize_t new_size = series.written + count;
  herr_t status = H5Dset_extent(dataset, &new_size);
  const hid_t file_space = H5Dget_space(dataset);
  status = status < 0 ? status
                      : H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &series.written, nullptr,
                                            &count, nullptr);
  const hid_t memory_space = H5Screate_simple(1, &count, nullptr);
  if (status >= 0)
    status = series.integer ? H5Dwrite(dataset, H5T_NATIVE_LLONG, memory_space, file_space,
                                       H5P_DEFAULT, series.pending_int.data())
                            : H5Dwrite(dataset, H5T_NATIVE_DOUBLE, memory_space, file_space,
                                       H5P_DEFAULT, series.pending_real.data());
  H5Sclose(memory_space);
  H5Sclose(file_space);
  H5Dclose(dataset);
  check(status, path_, "writing dataset '" + name + "'");
  series.written = new_size;
  series.pending_int.clear();
  series.pending_real.clear();
}

void MetricsFile::flush() {
  for (auto& [name, series] : series_) write_series(name, series);
  check(H5Fflush(file_, H5F_SCOPE_GLOBAL), path_, "flush");
}

std::vector<double> read_series(const std::string& path, const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw h5_error(path, "cannot open");
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (dataset < 0) {
    H5Fclose(file);
    throw h5_error(path, "no dataset '" + name + "'");
  }
  const hid_t space = H5Dget_space(dataset);
  hsize_t size = 0;
  H5Sget_simple_extent_dims(space, &size, nullptr);
  std::vector<double> values(size);
  const herr_t status = size ? H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                       values.data())
                             : 0;
  H5Sclose(space);
  H5Dclose(dataset);
  H5Fclose(file);
  check(status, path, "reading dataset '" + name + "'");
  return values;
}

std::string read_attribute(const std::string& path, const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw h5_error(path, "cannot open");
  const hid_t attribute = H5Aopen_by_name(file, "/", name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  if (attribute < 0) {
    H5Fclose(file);
    throw h5_error(path, "no attribute '" + name + "'");
  }
  const hid_t type = string_type();
  char* text = nullptr;
  const herr_t status = H5Aread(attribute, type, &text);
  std::string value = status >= 0 && text ? text : "";
  if (text) H5free_memory(text);
  H5Tclose(type);
  H5Aclose(attribute);
  H5Fclose(file);
  check(status, path, "reading attribute '" + name + "'");
  return value;
}

}  // namespace trident::metrics
