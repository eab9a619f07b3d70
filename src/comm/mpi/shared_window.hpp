// Memory shared by the ranks of a communicator that all live on one host: an MPI-3 shared
// window (MPI_Win_allocate_shared) holding, per rank, an arrival counter (the barrier of the
// shared-memory collectives) and two staging buffers used alternately by successive chunks.
//
// Layout of rank k's part (contiguous, 64-byte aligned):
//   [arrived: uint64_t, padded to 64 bytes][buffer 0: capacity floats][buffer 1: capacity floats]
// Every rank reads every other rank's part directly: that is the point — a node's ranks reduce
// and gather with loads and stores instead of messages (NCCL's NVLink P2P transport does the same
// between the GPUs of a node).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace trident::comm {

class SharedWindow {
 public:
  // Collective over comm. Null when comm's ranks do not all share one host's memory.
  static std::unique_ptr<SharedWindow> create(MPI_Comm comm, size_t capacity_floats);
  ~SharedWindow();
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  static constexpr size_t kCapacity = size_t(1) << 20;  // floats per buffer (4 MiB) the collectives use
  size_t capacity() const { return capacity_; }     // floats per buffer
  float* buffer(int rank, int which) const;         // which ∈ {0, 1}
  void arrive(int rank, uint64_t epoch) const;      // release: this rank's writes before it are visible
  bool arrived(int rank, uint64_t epoch) const;     // acquire: rank's writes before arrive() are visible
  static size_t bytes_per_rank(size_t capacity_floats);

 private:
  SharedWindow() = default;
  MPI_Win window_ = MPI_WIN_NULL;
  size_t capacity_ = 0;
  std::vector<char*> parts_;  // by rank
};

}  // namespace trident::comm
