// How a job's group communicators are made: the all-reduce algorithm per level, the backend,
// the watchdog's timeout, the emulated links and, for the model on a device over MPI, how its
// buffers are staged through host memory. Read from [comm] and [topology] (job/settings.cpp).
#pragma once

#include <string>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/nccl/nccl_settings.hpp"
#include "comm/wrappers/emulated_links.hpp"
#include "comm/wrappers/staged.hpp"

namespace trident::comm {

// The memory a shared window of comm.node_algo = shm takes on each of its ranks (its staging
// buffers and flags: comm/mpi/shared_window.hpp), for the memory model.
size_t shared_window_bytes_per_rank();

struct CollectiveSettings {
  std::string algo = "auto";  // flat | hierarchical | auto | mpi
  Algo node_algo = Algo::Tree, rack_algo = Algo::Tree, cross_rack_algo = Algo::Ring;
  double timeout_s = 300;
  LinkModel links;  // emulated link speeds per level (off by default): make_group_communicator
  // mpi: MPI only. nccl: also an NCCL communicator per group and per level, which the
  // operations on device streams go to (comm.backend resolved: comm/nccl/nccl_settings.hpp).
  std::string backend = "mpi";
  NcclSettings nccl;  // the NCCL choices per level (backend = nccl)
  // backend = mpi with the model on a device: how its buffers are staged through host memory
  // (comm/wrappers/staged.hpp). Unset: the model is in host memory.
  DeviceCopies staging;
};

}  // namespace trident::comm
