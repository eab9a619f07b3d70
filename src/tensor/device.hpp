// The vocabulary shared by the kernel backends (kernels/) and the communicators (comm/): the
// element types of buffers, the device memory lives on, and the ordered queue work runs on.
// Header-only and free of MPI, CUDA and the model, so both seams can depend on it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trident {

// Element types of buffers that kernels and collectives handle. bf16 and fp16 are 16-bit
// storage types (uint16_t in host code); f64 carries the few scalars reduced per step (loss,
// squared norms); i32 the tokens.
enum class DType : uint8_t { f32, bf16, fp16, f64, i32 };

constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::fp16:
      return 2;
    case DType::f64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
  }
  return 0;
}

constexpr const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
  }
  return "?";
}

// Where memory lives and kernels run: the host CPU, or CUDA device `index`, or the guarded
// backend's memory (kernels/guard: host memory that host code may not touch outside a kernel,
// the stand-in for device memory that finds such accesses on machines without a GPU).
enum class DeviceKind : uint8_t { cpu, cuda, guard };
struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = -1;  // the CUDA device ordinal; -1 on the CPU
  bool is_cpu() const { return kind == DeviceKind::cpu; }
};

// Kinds of allocation a backend provides: ordinary host memory, page-locked host memory (what
// a device copies to and from asynchronously; plain host memory on a CPU backend), and memory
// of the device itself.
enum class MemoryKind : uint8_t { host, pinned_host, device };

// An ordered queue of work on a device. On the CPU the handle is null and work runs in the
// calling thread, in program order; on CUDA it is a cudaStream_t. Kernels and collectives take
// the stream they are ordered on, so a device backend can overlap a communication stream with
// the compute stream (ordered by events) while the CPU backend runs the same calls in order.
struct Stream {
  Device device;
  void* handle = nullptr;
};

}  // namespace trident
