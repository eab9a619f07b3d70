// HDF5 time series.
#include "metrics/metrics_file.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/h5.hpp"

namespace trident::metrics {
namespace {

constexpr hsize_t kChunk = 1024;

std::runtime_error h5_error(const std::string& path, const std::string& what) {
  return std::runtime_error("metrics file '" + path + "': " + what);
}

void check(herr_t status, const std::string& path, const std::string& what) {
  if (status < 0) throw h5_error(path, what + " failed");
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
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();  // our messages, not HDF5's stack dumps
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) throw h5_error(path, "cannot create");
  write_attributes(attributes);
}

void MetricsFile::write_attributes(const std::vector<std::pair<std::string, std::string>>& attributes) {
  h5::Lock lock(h5::hdf5_mutex());
  for (const auto& [name, value] : attributes)
    if (!h5::write_string_attribute(file_, name, value)) throw h5_error(path_, "writing attribute '" + name + "' failed");
  check(H5Fflush(file_, H5F_SCOPE_GLOBAL), path_, "flush");
}

MetricsFile::~MetricsFile() {
  h5::Lock lock(h5::hdf5_mutex());
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
  h5::Lock lock(h5::hdf5_mutex());
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
  h5::Lock lock(h5::hdf5_mutex());
  for (auto& [name, series] : series_) write_series(name, series);
  check(H5Fflush(file_, H5F_SCOPE_GLOBAL), path_, "flush");
}

namespace {

// A whole 1-D dataset of an open file as doubles; std::runtime_error when it does not exist.
std::vector<double> read_all(hid_t file, const std::string& path, const std::string& name) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));  // HDF5's errors are quiet
  if (!dataset.valid()) throw h5_error(path, "no dataset '" + name + "'");
  h5::Handle space(H5Dget_space(dataset.get()));
  hsize_t size = 0;
  if (H5Sget_simple_extent_ndims(space.get()) != 1) throw h5_error(path, "'" + name + "' is not a series");
  H5Sget_simple_extent_dims(space.get(), &size, nullptr);
  std::vector<double> values(size);
  if (size) check(H5Dread(dataset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), path,
                  "reading dataset '" + name + "'");
  return values;
}

}  // namespace

std::vector<double> read_series(const std::string& path, const std::string& name) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) throw h5_error(path, "cannot open");
  return read_all(file.get(), path, name);
}

std::string read_attribute(const std::string& path, const std::string& name) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) throw h5_error(path, "cannot open");
  std::string value;
  if (!h5::read_string_attribute(file.get(), name, value)) throw h5_error(path, "no attribute '" + name + "'");
  return value;
}

namespace {

// The names of every dataset in the file (groups walked recursively).
herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* names) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

// The family of a series: the index series whose rows its rows follow.
std::string index_of(const std::string& name) {
  if (name.rfind("val_", 0) == 0) return "val_step";
  if (name.rfind("checkpoint/", 0) == 0) return "checkpoint/step";
  return "step";
}

}  // namespace

MetricsFile::MetricsFile(const std::string& path, const std::vector<std::pair<std::string, std::string>>& attributes,
                         int64_t resume_step)
    : path_(path) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file_ < 0) {  // lost or never written: start a new one
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file_ < 0) throw h5_error(path, "cannot create");
    write_attributes(attributes);
    return;
  }
  std::vector<std::string> names;
  if (H5Ovisit(file_, H5_INDEX_NAME, H5_ITER_NATIVE, collect_dataset, &names) < 0)
    throw h5_error(path, "cannot list its datasets");
  std::map<std::string, hsize_t> keep;  // per index series: its rows of steps <= resume_step
  for (const char* index : {"step", "val_step", "checkpoint/step"}) {
    if (std::find(names.begin(), names.end(), index) == names.end()) continue;
    const std::vector<double> steps = read_all(file_, path, index);
    keep[index] = static_cast<hsize_t>(std::count_if(steps.begin(), steps.end(),
                                                     [&](double s) { return s <= double(resume_step); }));
  }
  for (const std::string& name : names) {
    h5::Handle dataset(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
    h5::Handle space(H5Dget_space(dataset.get()));
    hsize_t rows = 0;
    if (!dataset.valid() || H5Sget_simple_extent_ndims(space.get()) != 1) continue;
    H5Sget_simple_extent_dims(space.get(), &rows, nullptr);
    const hsize_t kept = std::min(rows, keep.count(index_of(name)) ? keep[index_of(name)] : 0);
    check(H5Dset_extent(dataset.get(), &kept), path, "cutting back dataset '" + name + "'");
    h5::Handle type(H5Dget_type(dataset.get()));
    Series& series = series_[name];
    series.integer = H5Tget_class(type.get()) == H5T_INTEGER;
    series.written = kept;
  }
  write_attributes(attributes);
}

}  // namespace trident::metrics
