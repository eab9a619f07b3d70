// Parallel HDF5 through the communicator's MPI handle.
#include "ckpt/parallel_hdf5.hpp"

#include "comm/mpi/native_handle.hpp"

namespace trident::ckpt {

using h5::Handle;

Handle open_parallel(const std::string& path, comm::Communicator& group, bool create) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  Handle access(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fapl_mpio(access.get(), comm::native_handle(group), MPI_INFO_NULL);
  H5Pset_all_coll_metadata_ops(access.get(), true);  // metadata reads: one rank reads, all get it
  H5Pset_coll_metadata_write(access.get(), true);
  return Handle(create ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get())
                       : H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()));
}

Handle collective_transfer() {
  Handle transfer(H5Pcreate(H5P_DATASET_XFER));
  H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE);
  return transfer;
}

std::pair<Handle, Handle> selection(hid_t dataset, const std::vector<Hyperslab>& slabs) {
  Handle file_space(H5Dget_space(dataset));
  H5Sselect_none(file_space.get());
  hsize_t elements = 0;
  for (const Hyperslab& slab : slabs) {
    std::vector<hsize_t> start, stride, count, block;
    for (const SlabDim& d : slab.dims) {
      start.push_back(static_cast<hsize_t>(d.start));
      stride.push_back(static_cast<hsize_t>(d.stride));
      count.push_back(static_cast<hsize_t>(d.count));
      block.push_back(static_cast<hsize_t>(d.block));
    }
    H5Sselect_hyperslab(file_space.get(), elements == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(),
                        stride.data(), count.data(), block.data());
    elements += static_cast<hsize_t>(slab.elements());
  }
  const hsize_t memory_size = elements ? elements : 1;
  Handle memory_space(H5Screate_simple(1, &memory_size, nullptr));
  if (elements == 0) H5Sselect_none(memory_space.get());
  return {std::move(file_space), std::move(memory_space)};
}

}  // namespace trident::ckpt
