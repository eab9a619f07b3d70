// From a Communicator to its MPI handle, and back.
#include "comm/mpi/native_handle.hpp"

#include <limits>
#include <stdexcept>

#include "core/error.hpp"

namespace trident::comm {

MPI_Comm native_handle(Communicator& group) {
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&group)) return mpi->handle();
  throw std::logic_error("the " + group.name() + " communicator is not a plain MPI communicator: it has no native handle");
}

std::unique_ptr<MpiCommunicator> over_native(MPI_Comm comm, const std::string& name) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  return std::make_unique<MpiCommunicator>(comm, std::vector<topo::Level>(size, topo::Level::Node), name,
                                           std::numeric_limits<double>::infinity());
}

}  // namespace trident::comm
