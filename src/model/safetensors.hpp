// Hugging Face's safetensors format: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"format": "pt", ...}, NAME: {"dtype": "F32", "shape": [r, c],
//    "data_offsets": [begin, end]}, ...}
// (padded with spaces to a multiple of 8 bytes), then the tensors' raw little-endian bytes, each
// at [begin, end) of what follows the header. We read F32, BF16 and F16 tensors (widened to f32)
// and write any of the three.
//
// Reading is by pread of the byte range a caller asks for, never a memory mapping: a rank reads
// only the rows of its own slice (a 70B file is never whole in one rank's memory), and a file
// truncated or replaced while it is read gives an error naming it instead of a SIGBUS at some
// load. Every header is checked before any tensor is read: its size, its JSON, every entry's
// dtype, shape and offsets (inside the file, of the size the shape and dtype say, no two
// overlapping); what is wrong is a std::runtime_error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensor/device.hpp"

namespace trident::model {

// The largest header we read (the safetensors library's own limit: 100 MB).
constexpr int64_t kMaxSafetensorsHeader = 100'000'000;

struct SafeTensor {
  std::string name;
  DType dtype = DType::f32;     // f32, bf16 or fp16
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;   // bytes, from the start of the file
  int64_t count() const;        // elements
};

class SafetensorsReader {
 public:
  // Opens `path` and checks its header. Throws std::runtime_error "safetensors file 'PATH': ...".
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafeTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafeTensor* find(const std::string& name) const;  // null when absent
  // Elements [first, first + count) of `tensor` (flat, row-major) widened to f32 into out.
  // Throws std::runtime_error naming the file when the read comes back short.
  void read(const SafeTensor& tensor, int64_t first, int64_t count, float* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<SafeTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: its name, shape, and a function that fills its values (f32, row-major,
// count of the shape) into the buffer it is given — called once, when the tensor is written, so
// that a file is written holding one tensor in memory at a time.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  std::function<void(float*)> fill;
  int64_t count() const;
};

// Bytes one tensor takes in a file of `dtype`.
int64_t stored_bytes(const TensorToWrite& tensor, DType dtype);

// Writes the tensors into `path` (a temporary name, synced, then renamed), in the given order,
// values rounded to nearest even when `dtype` is bf16 or fp16. Throws std::runtime_error
// naming the file on a write failure.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// The safetensors' name of a dtype ("F32", "BF16", "F16").
const char* safetensors_dtype_name(DType dtype);

}  // namespace trident::model
