// NCCL's presence, the CUDA devices, and the factory of NCCL communicators; without NCCL in
// the build, the answers of a binary that has none.
#include "comm/nccl/nccl.hpp"

#include <cstdlib>
#include <stdexcept>

#include "comm/agreement.hpp"
#include "comm/world.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

#if TRIDENT_CUDA
#include <cuda_runtime.h>
#endif
#if TRIDENT_NCCL
#include <nccl.h>

#include "comm/nccl/nccl_communicator.hpp"
#include "comm/nccl/nccl_library.hpp"
#endif

namespace trident::comm {

#if TRIDENT_NCCL

bool nccl_built_in() { return true; }

std::string nccl_problem() { return nccl_library().problem(); }

std::string nccl_summary() {
  if (const std::string why = nccl_problem(); !why.empty()) return "NCCL not loadable (" + why + ")";
  int code = 0;
  const std::string version = ncclGetVersion(&code) != ncclSuccess ? "of unknown version" : dotted_version(code);
  return "NCCL " + version + " (" + nccl_library().path() + ")";
}

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, std::vector<topo::Level> level_of_rank,
                                                     const NcclCommOptions& options, double timeout_s,
                                                     Traffic kind) {
  return std::make_unique<NcclCommunicator>(comm, std::move(level_of_rank), options, timeout_s, kind);
}

#else

bool nccl_built_in() { return false; }
std::string nccl_problem() { return "this binary was built without NCCL"; }
std::string nccl_summary() { return "NCCL not built in"; }

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm, std::vector<topo::Level>, const NcclCommOptions& options,
                                                     double, Traffic) {
  throw std::runtime_error("NCCL communicator for the " + options.name +
                           " group: this binary was built without NCCL; use comm.backend = mpi");
}

#endif

// The rank's GPU is CUDA's, not NCCL's: a CUDA build without NCCL (NCCL=0 where nccl.h is
// missing) runs its ranks over MPI, each on its own GPU all the same.
#if TRIDENT_CUDA

int cuda_devices_visible() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

void use_cuda_device(int index) {
  const cudaError_t status = cudaSetDevice(index);
  if (status != cudaSuccess)
    throw std::runtime_error("cudaSetDevice(" + std::to_string(index) + "): " + cudaGetErrorString(status));
}

namespace {

std::string bus_id(int index) {
  char id[32] = {};
  if (index < 0 || cudaDeviceGetPCIBusId(id, sizeof id, index) != cudaSuccess) return "device " + std::to_string(index);
  return id;
}

}  // namespace

#else

int cuda_devices_visible() { return 0; }

void use_cuda_device(int index) {
  throw std::runtime_error("CUDA device " + std::to_string(index) + ": this binary was built without CUDA");
}

namespace {
std::string bus_id(int index) { return "device " + std::to_string(index); }
}  // namespace

#endif

namespace {

// The devices this process sees, by their bus ids in CUDA's order.
std::string visible_set(int visible) {
  std::string ids;
  for (int i = 0; i < visible; ++i) ids += bus_id(i) + " ";
  return ids;
}

}  // namespace

// The ranks of a host that see the same devices share them out, each the next: every rank sees
// all of the host's GPUs (srun --gpus-per-node, mpirun), or one of its own (--gpus-per-task=1:
// its device 0), or its socket's (--gpu-bind=closest: the ranks of a socket, interleaved with the
// other socket's by the task distribution, take that socket's GPUs in turn).
DeviceChoice choose_cuda_device(Communicator& world) {
  const std::unique_ptr<Communicator> host = split_by_host(world, "host");
  const int visible = cuda_devices_visible();
  const std::unique_ptr<Communicator> seeing_the_same = split_by_value(*host, visible_set(visible), "ranks seeing the same GPUs");
  DeviceChoice choice;
  choice.index = device_for_rank(seeing_the_same->rank(), visible);
  const std::vector<std::string> bus_ids = all_gather_strings(*host, bus_id(choice.index));
  std::string problem = device_sharing_problem(bus_ids, visible);
  if (!problem.empty() && visible > 0) {  // ranks sharing a GPU: what this one sees
    const char* restricted = std::getenv("CUDA_VISIBLE_DEVICES");
    problem += " (this rank sees " + std::to_string(visible) + " CUDA device" + (visible == 1 ? "" : "s") +
               (restricted ? std::string(", CUDA_VISIBLE_DEVICES=") + restricted : std::string()) + ")";
  }
  choice.problem = first_error(world, problem);
  return choice;
}

}  // namespace trident::comm
