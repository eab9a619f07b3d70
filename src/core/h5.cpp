// HDF5 handle and attribute helpers.
#include "core/h5.hpp"

namespace trident::h5 {

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  Lock lock(hdf5_mutex());
  if (id_ >= 0) H5Idec_ref(id_);
  id_ = -1;
}

Handle string_type() {
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  return type;
}

namespace {

bool write_attribute(hid_t object, const std::string& name, hid_t file_type, hid_t memory_type,
                     const void* value) {
  Lock lock(hdf5_mutex());
  if (H5Aexists(object, name.c_str()) > 0 && H5Adelete(object, name.c_str()) < 0) return false;
  Handle space(H5Screate(H5S_SCALAR));
  Handle attribute(H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  return attribute.valid() && H5Awrite(attribute.get(), memory_type, value) >= 0;
}

bool read_attribute(hid_t object, const std::string& name, H5T_class_t expected, hid_t memory_type,
                    void* value) {
  Lock lock(hdf5_mutex());
  if (H5Aexists(object, name.c_str()) <= 0) return false;
  Handle attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  if (!attribute.valid()) return false;
  Handle type(H5Aget_type(attribute.get()));
  if (H5Tget_class(type.get()) != expected) return false;
  return H5Aread(attribute.get(), memory_type, value) >= 0;
}

}  // namespace

bool write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const Handle type = string_type();
  const char* text = value.c_str();
  return write_attribute(object, name, type.get(), type.get(), &text);
}

bool write_int_attribute(hid_t object, const std::string& name, int64_t value) {
  return write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

bool write_uint_attribute(hid_t object, const std::string& name, uint64_t value) {
  return write_attribute(object, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}

bool read_string_attribute(hid_t object, const std::string& name, std::string& value) {
  Lock lock(hdf5_mutex());
  const Handle type = string_type();
  char* text = nullptr;
  if (!read_attribute(object, name, H5T_STRING, type.get(), &text)) return false;
  value = text ? text : "";
  if (text) H5free_memory(text);
  return true;
}

bool read_int_attribute(hid_t object, const std::string& name, int64_t& value) {
  return read_attribute(object, name, H5T_INTEGER, H5T_NATIVE_INT64, &value);
}

bool read_uint_attribute(hid_t object, const std::string& name, uint64_t& value) {
  return read_attribute(object, name, H5T_INTEGER, H5T_NATIVE_UINT64, &value);
}

void quiet_errors() {
  Lock lock(hdf5_mutex());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

}  // namespace trident::h5
