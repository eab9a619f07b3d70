// The safetensors format: the header checked whole before a tensor is read; reads by pread.
#include "model/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "comm/wrappers/widen.hpp"
#include "core/file_util.hpp"
#include "core/json.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors are little-endian; so must the host be");

namespace trident::model {
namespace {

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error("safetensors file '" + path + "': " + what);
}

// The shape's element count, or -1 when it overflows 2^62.
int64_t checked_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > (int64_t(1) << 62) / d) return -1;
    n *= d;
  }
  return n;
}

DType dtype_from_name(const std::string& path, const std::string& tensor, const std::string& name) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::fp16;
  throw file_error(path, "tensor '" + tensor + "' has dtype " + name + "; Trident reads F32, BF16 and F16");
}

bool pread_all(int fd, void* into, size_t bytes, int64_t at) {
  char* p = static_cast<char*>(into);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, p, bytes, at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got, bytes -= static_cast<size_t>(got), at += got;
  }
  return true;
}

// One header entry, checked: dtype, shape and offsets (relative to the data, made absolute).
SafeTensor parse_entry(const std::string& path, const std::string& name, const JsonLookup& entry, int64_t data_start,
                       int64_t file_bytes) {
  auto bad = [&](const std::string& what) { return file_error(path, "tensor '" + name + "': " + what); };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    throw bad("its header entry is not an object with dtype, shape and data_offsets");
  if (!entry["dtype"].is_string()) throw bad("dtype is not a string");
  SafeTensor t;
  t.name = name;
  t.dtype = dtype_from_name(path, name, entry["dtype"].get<std::string>());
  if (!entry["shape"].is_array()) throw bad("shape is not an array");
  for (const JsonLookup& d : entry["shape"]) {
    if (!d.is_number_unsigned()) throw bad("shape " + entry["shape"].dump() + " is not a list of whole numbers >= 0");
    t.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(d.get<uint64_t>(), uint64_t(1) << 62)));
  }
  const JsonLookup& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    throw bad("data_offsets " + offsets.dump() + " is not [begin, end]");
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  const uint64_t data_bytes = static_cast<uint64_t>(file_bytes - data_start);
  if (begin > end || end > data_bytes)
    throw bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] do not lie in the file's " +
              std::to_string(data_bytes) + " data bytes (truncated?)");
  const int64_t count = checked_count(t.shape);
  if (count < 0 || static_cast<uint64_t>(count) * dtype_size(t.dtype) != end - begin)
    throw bad("shape " + entry["shape"].dump() + " of " + entry["dtype"].get<std::string>() + " needs " +
              (count < 0 ? std::string("more bytes than a file can hold")
                         : std::to_string(static_cast<uint64_t>(count) * dtype_size(t.dtype)) + " bytes") +
              ", its data_offsets give " + std::to_string(end - begin));
  t.begin = data_start + static_cast<int64_t>(begin), t.end = data_start + static_cast<int64_t>(end);
  return t;
}

}  // namespace

int64_t SafeTensor::count() const { return checked_count(shape); }
int64_t TensorToWrite::count() const { return checked_count(shape); }

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "BF16";
    case DType::fp16: return "F16";
    case DType::f32: return "F32";
    default: throw std::logic_error("safetensors: only f32, bf16 and fp16 are written");
  }
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  const std::string not_file = regular_file_problem(path);
  if (!not_file.empty()) throw file_error(path, not_file);
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw file_error(path, std::strerror(errno));
  struct stat st {};
  uint64_t header_bytes = 0;
  try {
    if (::fstat(fd_, &st) != 0) throw file_error(path, std::strerror(errno));
    const int64_t file_bytes = st.st_size;
    if (file_bytes < 8 || !pread_all(fd_, &header_bytes, 8, 0))
      throw file_error(path, "shorter than the 8 bytes of its header length");
    if (header_bytes > static_cast<uint64_t>(kMaxSafetensorsHeader) || header_bytes + 8 > static_cast<uint64_t>(file_bytes))
      throw file_error(path, "its header length " + std::to_string(header_bytes) + " is more than " +
                                 (header_bytes > static_cast<uint64_t>(kMaxSafetensorsHeader)
                                      ? "the largest allowed (100,000,000 bytes)"
                                      : "the file's " + std::to_string(file_bytes) + " bytes") +
                                 ": not a safetensors file, or truncated");
    std::string text(header_bytes, '\0');
    if (!pread_all(fd_, text.data(), text.size(), 8)) throw file_error(path, "could not read its header");
    const JsonLookup header = parse_json_lookup("safetensors file '" + path + "'", text, "expected a JSON object of tensors");
    if (!header.is_object()) throw file_error(path, "its header is not a JSON object");
    const int64_t data_start = 8 + static_cast<int64_t>(header_bytes);
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) throw file_error(path, "__metadata__ is not an object");
        for (const auto& [key, value] : entry.items())
          metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
        continue;
      }
      tensors_.push_back(parse_entry(path, name, entry, data_start, file_bytes));
      index_[name] = tensors_.size() - 1;
    }
    std::vector<const SafeTensor*> by_offset;
    for (const SafeTensor& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < by_offset.size(); ++i)
      if (by_offset[i]->begin < by_offset[i - 1]->end)
        throw file_error(path, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

const SafeTensor* SafetensorsReader::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsReader::read(const SafeTensor& t, int64_t first, int64_t count, float* out) const {
  if (first < 0 || count < 0 || first + count > t.count())
    throw std::logic_error("SafetensorsReader::read: elements beyond tensor '" + t.name + "'");
  const size_t size = dtype_size(t.dtype);
  constexpr int64_t kChunk = int64_t(1) << 20;  // elements converted at a time
  std::vector<uint16_t> low(t.dtype == DType::f32 ? 0 : static_cast<size_t>(std::min(count, kChunk)));
  for (int64_t done = 0; done < count;) {
    const int64_t n = t.dtype == DType::f32 ? count - done : std::min(count - done, kChunk);
    void* into = t.dtype == DType::f32 ? static_cast<void*>(out + done) : static_cast<void*>(low.data());
    if (!pread_all(fd_, into, static_cast<size_t>(n) * size, t.begin + (first + done) * static_cast<int64_t>(size)))
      throw file_error(path_, "tensor '" + t.name + "' could not be read whole (the file changed or was truncated)");
    if (t.dtype != DType::f32) comm::widen(t.dtype, low.data(), out + done, static_cast<size_t>(n));
    done += n;
  }
}

int64_t stored_bytes(const TensorToWrite& tensor, DType dtype) {
  return tensor.count() * static_cast<int64_t>(dtype_size(dtype));
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    header["__metadata__"] = Json::object();
    for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
  }
  int64_t at = 0;
  for (const TensorToWrite& t : tensors) {
    const int64_t bytes = stored_bytes(t, dtype);
    header[t.name] = {{"dtype", safetensors_dtype_name(dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data 8-byte aligned, as the library writes it
  const uint64_t length = text.size();

  const std::string temporary = path + ".tmp";
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (f == nullptr) throw file_error(path, std::string("cannot create it: ") + std::strerror(errno));
  bool ok = std::fwrite(&length, 8, 1, f) == 1 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  std::vector<float> values;
  std::vector<uint16_t> low;
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    values.assign(static_cast<size_t>(tensors[i].count()), 0.0f);
    tensors[i].fill(values.data());
    if (dtype == DType::f32) {
      ok = std::fwrite(values.data(), sizeof(float), values.size(), f) == values.size();
    } else {
      low.resize(values.size());
      comm::narrow(dtype, values.data(), low.data(), values.size());
      ok = std::fwrite(low.data(), sizeof(uint16_t), low.size(), f) == low.size();
    }
  }
  const int saved = errno;
  if (std::fclose(f) != 0) ok = false;
  std::string problem = ok ? sync_to_disk(temporary) : std::string("write failed: ") + std::strerror(saved);
  if (problem.empty()) problem = rename_into_place(temporary, path);
  if (!problem.empty()) {
    std::remove(temporary.c_str());
    throw file_error(path, problem);
  }
}

}  // namespace trident::model
