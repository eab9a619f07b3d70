// What the program sees of NCCL, with or without NCCL in the build: whether it is there, the
// devices a rank can choose from, and the factory of NCCL communicators. In a build without
// NCCL (make CUDA=0) the same declarations answer "not built in" and the factory refuses, so
// that callers need no #if; comm.backend = nccl is a deck error there before any call.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/nccl/nccl_settings.hpp"
#include "comm/traffic.hpp"

namespace trident::comm {

bool nccl_built_in();
// Why NCCL cannot be used by this process ("" where it can): not built in, or its library not
// loadable (src/comm/nccl/nccl_library.cpp opens it on first use).
std::string nccl_problem();
// For `trident version`: "NCCL 2.28.9 (/usr/lib/.../libnccl.so.2)", "NCCL not loadable (why)",
// "NCCL not built in".
std::string nccl_summary();
int cuda_devices_visible();  // 0 without CUDA, a driver or a device
// Makes `index` the calling thread's CUDA device (the one its NCCL communicators and
// allocations use); throws std::runtime_error where CUDA refuses.
void use_cuda_device(int index);

// Collective over `world` (every rank of the job): the CUDA device of this rank
// (device_for_rank, by its place among the ranks of its host) and why it cannot have one of its
// own (device_sharing_problem over the PCI bus ids the host's ranks chose; "" if it can) — the
// same verdict on every rank of the job: the first problem any rank found.
struct DeviceChoice {
  int index = -1;
  std::string problem;
};
DeviceChoice choose_cuda_device(Communicator& world);

// Collective over `comm` (which stays the caller's, and must outlive the result): an NCCL
// communicator over the same ranks in the same order, on the calling thread's current device.
// level_of_rank[i]: the level at which rank i of comm is from this rank (byte counts).
// Throws std::runtime_error in a build without NCCL.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank,
                                                     const NcclCommOptions& options, double timeout_s,
                                                     Traffic kind);

}  // namespace trident::comm
