// NCCL's presence, the CUDA devices, and the factory of NCCL communicators; without NCCL in
// the build, the answers of a binary that has none.
#include "comm/nccl/nccl.hpp"

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

DeviceChoice choose_cuda_device(Communicator& world) {
  const std::unique_ptr<Communicator> host = split_by_host(world, "host");
  const int visible = cuda_devices_visible();
  DeviceChoice choice;
  choice.index = device_for_rank(host->rank(), visible);
  const std::vector<std::string> bus_ids = all_gather_strings(*host, bus_id(choice.index));
  choice.problem = first_error(world, device_sharing_problem(bus_ids, visible));
  return choice;
}

}  // namespace trident::comm
