// Small HDF5 helpers shared by metrics.h5 and the checkpoints: an owning handle, string and
// integer attributes, and the one lock every HDF5 call of the process takes.
//
// Debian's parallel HDF5 is not built thread-safe, and an asynchronous checkpoint writes from a
// background thread while rank 0's main thread appends to metrics.h5: every sequence of HDF5
// calls holds hdf5_mutex() (a recursive mutex, so helpers may nest).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>

namespace trident::h5 {

std::recursive_mutex& hdf5_mutex();
using Lock = std::lock_guard<std::recursive_mutex>;

// Closes an HDF5 identifier of any kind (file, group, dataset, dataspace, type, property list).
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  hid_t release() {  // the caller closes it
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
};

// Variable-length UTF-8 strings: h5py reads them as str, h5dump prints them as text.
Handle string_type();

// Attributes of `object` (a file, group or dataset). Writers replace an existing attribute;
// they return false on failure. Readers return false when the attribute is missing or of
// another kind. In a file opened for parallel access, writes are collective (same value on
// every rank).
bool write_string_attribute(hid_t object, const std::string& name, const std::string& value);
bool write_int_attribute(hid_t object, const std::string& name, int64_t value);
bool write_uint_attribute(hid_t object, const std::string& name, uint64_t value);
bool read_string_attribute(hid_t object, const std::string& name, std::string& value);
bool read_int_attribute(hid_t object, const std::string& name, int64_t& value);
bool read_uint_attribute(hid_t object, const std::string& name, uint64_t& value);

// HDF5's own error stack printing off (we report errors in our words); idempotent.
void quiet_errors();

}  // namespace trident::h5
