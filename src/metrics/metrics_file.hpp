// metrics.h5: one chunked, extendable 1-D dataset per metric (float64; "step"-like integer
// series as int64), written by rank 0, with the resolved deck as attributes of the root group.
// Values are buffered in memory and written on flush(); the file is flushed (H5Fflush) each
// time, so a run killed later keeps everything up to its last flush. Readable with h5dump,
// h5py and any HDF5 tool.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trident::metrics {

class MetricsFile {
 public:
  // Creates (truncates) the file. attributes: (name, text) pairs stored as string attributes
  // of "/". Throws std::runtime_error naming the file on any HDF5 failure.
  MetricsFile(const std::string& path, const std::vector<std::pair<std::string, std::string>>& attributes);
  // Continues the file of a run resumed after `resume_step` steps: every series is cut back to
  // its rows of steps <= resume_step, so that the file reads as if the run had never stopped.
  // A series' rows follow an index series by name: val_* follow val_step, checkpoint/* follow
  // checkpoint/step, all others step (appended once per step). The attributes are replaced; a
  // missing or unreadable file is created anew.
  MetricsFile(const std::string& path, const std::vector<std::pair<std::string, std::string>>& attributes,
              int64_t resume_step);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // Appends one value to the dataset `name` (created on first use).
  void append(const std::string& name, double value);
  void append_int(const std::string& name, long long value);
  // Writes every buffered value and flushes the file to disk.
  void flush();
  const std::string& path() const { return path_; }

 private:
  struct Series {
    bool integer = false;
    std::vector<double> pending_real;
    std::vector<long long> pending_int;
    hsize_t written = 0;
  };
  void write_series(const std::string& name, Series& series);
  void write_attributes(const std::vector<std::pair<std::string, std::string>>& attributes);

  std::string path_;
  hid_t file_ = -1;
  std::map<std::string, Series> series_;
};

// Reads a whole 1-D dataset as doubles (for tests and tools). Throws std::runtime_error.
std::vector<double> read_series(const std::string& path, const std::string& name);
// Reads a string attribute of "/".
std::string read_attribute(const std::string& path, const std::string& name);

}  // namespace trident::metrics
