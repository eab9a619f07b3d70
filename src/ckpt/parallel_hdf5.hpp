// Parallel HDF5 for the checkpoint files: a file opened by every rank of a communicator
// together (MPI-IO), collective transfers, and the selection of a rank's pieces of a dataset.
// The one adapter outside comm/ that hands HDF5 the MPI communicator under a Communicator
// (comm/mpi/native_handle.hpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ckpt/slab.hpp"
#include "comm/communicator.hpp"
#include "core/h5.hpp"

namespace trident::ckpt {

// Collective over `group` (a plain MPI communicator: comm/world.hpp): `path` created
// (truncated) or opened read-only by all its ranks; invalid where HDF5 refused.
h5::Handle open_parallel(const std::string& path, comm::Communicator& group, bool create);
// A transfer property list for collective reads and writes.
h5::Handle collective_transfer();
// The file dataspace of `dataset` with the union of `slabs` selected (nothing if none), and a
// memory space of as many contiguous elements.
std::pair<h5::Handle, h5::Handle> selection(hid_t dataset, const std::vector<Hyperslab>& slabs);

}  // namespace trident::ckpt
