// The shared window of a node's ranks: allocation, addresses of every rank's part, and the
// per-rank arrival counters.
#include "comm/mpi/shared_window.hpp"

#include "core/error.hpp"
#include "tensor/buffer.hpp"

namespace trident::comm {
namespace {

constexpr size_t kHeader = 64;  // the arrival counter, alone on its cache line

uint64_t* counter_of(char* part) { return reinterpret_cast<uint64_t*>(part); }

}  // namespace

size_t shared_window_bytes_per_rank() { return SharedWindow::bytes_per_rank(SharedWindow::kCapacity); }

size_t SharedWindow::bytes_per_rank(size_t capacity_floats) {
  return kHeader + 2 * capacity_floats * sizeof(float);
}

std::unique_ptr<SharedWindow> SharedWindow::create(MPI_Comm comm, size_t capacity_floats) {
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm host = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
  int host_size = 0;
  MPI_CHECK(MPI_Comm_size(host, &host_size));
  MPI_CHECK(MPI_Comm_free(&host));
  int everyone_shares = host_size == size ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &everyone_shares, 1, MPI_INT, MPI_LAND, comm));
  if (!everyone_shares) return nullptr;

  std::unique_ptr<SharedWindow> shared(new SharedWindow);
  shared->capacity_ = capacity_floats;
  const size_t bytes = bytes_per_rank(capacity_floats);
  char* mine = nullptr;
  MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, comm, &mine,
                                    &shared->window_));
  shared->parts_.resize(size);
  for (int k = 0; k < size; ++k) {
    MPI_Aint part_bytes = 0;
    int unit = 0;
    MPI_CHECK(MPI_Win_shared_query(shared->window_, k, &part_bytes, &unit, &shared->parts_[k]));
  }
  // Passive-target epoch for the window's lifetime: the standard's condition for direct loads
  // and stores (the unified memory model of shared windows makes them coherent).
  MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, shared->window_));
  __atomic_store_n(counter_of(mine), uint64_t(0), __ATOMIC_RELEASE);
  MPI_CHECK(MPI_Win_sync(shared->window_));
  MPI_CHECK(MPI_Barrier(comm));  // no rank reads a counter before its owner has zeroed it
  tracked_external(static_cast<int64_t>(bytes), MemoryCategory::Communication);
  return shared;
}

SharedWindow::~SharedWindow() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || window_ == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);
  tracked_external(-static_cast<int64_t>(bytes_per_rank(capacity_)), MemoryCategory::Communication);
}

float* SharedWindow::buffer(int rank, int which) const {
  return reinterpret_cast<float*>(parts_[rank] + kHeader) + static_cast<size_t>(which) * capacity_;
}

void SharedWindow::arrive(int rank, uint64_t epoch) const {
  __atomic_store_n(counter_of(parts_[rank]), epoch, __ATOMIC_RELEASE);
}

bool SharedWindow::arrived(int rank, uint64_t epoch) const {
  return __atomic_load_n(counter_of(parts_[rank]), __ATOMIC_ACQUIRE) >= epoch;
}

}  // namespace trident::comm
