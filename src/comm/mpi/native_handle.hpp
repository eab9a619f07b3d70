// The one way from a Communicator to the MPI communicator under it, for the code that must
// hand MPI's own handle to a library or to MPI itself: comm/'s own MPI code, and outside comm/
// only the checkpoint files' parallel HDF5 adapter (ckpt/parallel_hdf5.cpp). tests/e2e/layering.sh
// fails on any other file that includes this header or names MPI.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"

namespace trident::comm {

// The MPI communicator of a plain MPI communicator (make_world, duplicate, split_by_host, split,
// or an MpiCommunicator); any other kind (a group's hierarchical or NCCL communicator, a
// wrapper) is a programming error: std::logic_error naming it.
MPI_Comm native_handle(Communicator& group);

// A communicator over `comm` without a deadline, every peer counted at the node level (control
// messages, not the training's traffic); `comm` stays the caller's. For comm/'s own start-up
// code, which splits MPI communicators before the job's groups exist.
std::unique_ptr<MpiCommunicator> over_native(MPI_Comm comm, const std::string& name);

}  // namespace trident::comm
