// Parallel HDF5 checkpoint files: write, verify, read.
#include "ckpt/checkpoint_file.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "ckpt/checksum.hpp"
#include "ckpt/datasets.hpp"
#include "ckpt/metadata_attributes.hpp"
#include "ckpt/parallel_hdf5.hpp"
#include "comm/agreement.hpp"
#include "core/clock.hpp"
#include "core/file_util.hpp"
#include "core/h5.hpp"

namespace trident::ckpt {
namespace {

using h5::Handle;

// Errors seen by this rank, in order; agreed on by all ranks at the end of an operation
// (comm::first_error: the first error of the lowest rank that saw one, on every rank).
struct Errors {
  std::string first;
  void add(bool ok, const std::string& what) {
    if (!ok && first.empty()) first = what;
  }
};

// In place: the sums mod 2^64 over the group of every rank's checksums (the group's few-value
// collectives carry 32-bit words, so each rank's sums are gathered and added here).
void sum_over(comm::Communicator& group, std::vector<uint64_t>& sums) {
  if (sums.empty() || group.size() == 1) return;
  const size_t n = sums.size(), words = 2 * n;
  std::vector<uint64_t> all(n * static_cast<size_t>(group.size()));
  group.all_gather_values(sums.data(), all.data(), words, DType::i32, Stream{}).wait();
  std::fill(sums.begin(), sums.end(), 0);
  for (size_t r = 0; r < static_cast<size_t>(group.size()); ++r)
    for (size_t k = 0; k < n; ++k) sums[k] += all[r * n + k];
}

// This rank's share (1/size, in row-major order) of a dataset's checksum, read in pieces of at
// most kVerifyChunk elements so that verification needs the same small buffer for any shape.
// Every rank makes the same number of (collective) reads, some of them empty.
constexpr int64_t kVerifyChunk = int64_t(1) << 22;  // 16 MiB of float32

uint64_t checksum_of_share(hid_t dataset, const std::vector<int64_t>& shape, int rank, int size, Errors& errors,
                           const std::string& name) {
  const TensorSlab whole = whole_slab(shape);
  const int64_t n = whole.elements();
  const int64_t begin = n * rank / size, end = n * (rank + 1) / size;
  const int64_t largest_share = (n + size - 1) / size, reads = (largest_share + kVerifyChunk - 1) / kVerifyChunk;
  std::vector<float> values(static_cast<size_t>(std::min(end - begin, kVerifyChunk)));
  uint64_t sum = 0;
  for (int64_t k = 0; k < reads; ++k) {
    const int64_t from = std::min(end, begin + k * kVerifyChunk), to = std::min(end, from + kVerifyChunk);
    const std::vector<Hyperslab> slabs = from < to ? range_hyperslabs(whole, from, to) : std::vector<Hyperslab>{};
    auto [file_space, memory_space] = selection(dataset, slabs);
    const Handle transfer = collective_transfer();
    errors.add(H5Dread(dataset, H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer.get(), values.data()) >= 0,
               "reading dataset '" + name + "' failed (truncated file?)");
    const float* at = values.data();
    for (const Hyperslab& slab : slabs) {
      sum += partial_checksum(shape, slab, at);
      at += slab.elements();
    }
  }
  return sum;
}

}  // namespace

WriteResult write_checkpoint(const std::string& path, comm::Communicator& group, const StateView& state,
                             const Metadata& metadata) {
  if (!state.device().is_cpu()) return write_checkpoint(path, group, on_host(state, true).view, metadata);
  const auto start = std::chrono::steady_clock::now();
  WriteResult result;
  Errors errors;
  Handle file = open_parallel(path, group, true);
  if (!comm::all_true(group, file.valid())) {
    result.error = "cannot create '" + path + "'";
    return result;
  }
  const int sections = sections_of(metadata.kind);
  const auto specs = model::param_specs(state.config);
  std::vector<uint64_t> checksums;
  for (int section = 0; section < sections; ++section) {
    for (int t = 0; t < model::kNumParamTensors; ++t) {
      if (specs[t].count() == 0) continue;  // no dataset (has_dataset)
      const std::string name = dataset_name(state.config, section, t);
      h5::Lock lock(h5::hdf5_mutex());
      std::vector<hsize_t> shape(specs[t].shape.begin(), specs[t].shape.end());
      Handle space(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr));
      Handle create(H5Pcreate(H5P_DATASET_CREATE));
      H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER);  // every element is written: no fill pass
      Handle links(H5Pcreate(H5P_LINK_CREATE));
      H5Pset_create_intermediate_group(links.get(), 1);
      Handle dataset(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), links.get(), create.get(),
                                H5P_DEFAULT));
      if (!comm::all_true(group, dataset.valid())) {
        errors.add(false, "creating dataset '" + name + "' in '" + path + "' failed");
        section = sections;
        break;
      }
      const Piece piece = piece_of(state, section, t, true);
      auto [file_space, memory_space] = selection(dataset.get(), piece.slabs);
      const Handle transfer = collective_transfer();
      errors.add(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer.get(),
                          piece.data) >= 0,
                 "writing dataset '" + name + "' to '" + path + "' failed (disk full?)");
      uint64_t sum = 0;
      const float* values = piece.data;
      for (size_t k = 0; k < piece.slabs.size(); ++k) {
        if (piece.counted[k]) sum += partial_checksum(specs[t].shape, piece.slabs[k], values);
        values += piece.slabs[k].elements();
      }
      checksums.push_back(sum);
      result.bytes += specs[t].count() * static_cast<int64_t>(sizeof(float));
    }
  }
  sum_over(group, checksums);
  if (checksums.size() == checkpoint_datasets(state.config, metadata.kind).size()) {
    h5::Lock lock(h5::hdf5_mutex());
    size_t k = 0;
    for (int section = 0; section < sections; ++section)
      for (int t = 0; t < model::kNumParamTensors; ++t) {
        if (specs[t].count() == 0) continue;
        const std::string name = dataset_name(state.config, section, t);
        Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
        errors.add(h5::write_uint_attribute(dataset.get(), "checksum", checksums[k++]),
                   "writing the checksum of '" + name + "' failed");
      }
    const std::string problem = write_metadata(file.get(), metadata);
    errors.add(problem.empty(), problem);
    errors.add(h5::write_int_attribute(file.get(), "complete", 1), "writing the completion mark failed");
    errors.add(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, "flushing '" + path + "' failed (disk full?)");
  }
  {
    h5::Lock lock(h5::hdf5_mutex());
    errors.add(H5Fclose(file.release()) >= 0, "closing '" + path + "' failed (disk full?)");
  }
  if (group.rank() == 0) {
    const std::string problem = sync_to_disk(path);
    errors.add(problem.empty(), problem);
  }
  result.error = comm::first_error(group, errors.first);
  result.seconds = seconds_since(start);
  return result;
}

Metadata read_metadata(const std::string& path) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) throw std::runtime_error("'" + path + "' cannot be opened as HDF5 (truncated, or not a checkpoint)");
  Metadata metadata;
  std::string problem = read_metadata_of(file.get(), metadata);
  if (!problem.empty()) throw std::runtime_error("'" + path + "' is not a sound trident checkpoint: " + problem);
  problem = name_mismatch(path, metadata);
  if (!problem.empty()) throw std::runtime_error("'" + path + "': " + problem);
  problem = storage_problem(file.get(), path, metadata);
  if (!problem.empty()) throw std::runtime_error("'" + path + "' is not a sound trident checkpoint: " + problem);
  return metadata;
}

std::string verify_checkpoint(const std::string& path, comm::Communicator& group) {
  const int rank = group.rank(), size = group.size();
  Handle file = open_parallel(path, group, false);
  if (!comm::all_true(group, file.valid())) return "cannot be opened as HDF5 (truncated, or not a checkpoint)";
  Metadata metadata;
  int64_t complete = 0;
  std::string problem = read_metadata_of(file.get(), metadata);
  if (problem.empty()) problem = name_mismatch(path, metadata);
  if (problem.empty() && (!h5::read_int_attribute(file.get(), "complete", complete) || complete != 1))
    problem = "not marked complete (its writing was interrupted)";
  if (problem.empty()) problem = storage_problem(file.get(), path, metadata);
  if (!comm::all_true(group, problem.empty())) return problem.empty() ? "metadata unreadable on some rank" : problem;
  std::vector<uint64_t> computed, stored;
  Errors errors;
  for (const auto& [name, shape] : checkpoint_datasets(metadata.model, metadata.kind)) {
    h5::Lock lock(h5::hdf5_mutex());
    Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
    uint64_t checksum = 0;
    if (!comm::all_true(group, h5::read_uint_attribute(dataset.get(), "checksum", checksum))) {
      errors.add(false, "dataset '" + name + "' has no checksum");
      break;
    }
    computed.push_back(checksum_of_share(dataset.get(), shape, rank, size, errors, name));
    stored.push_back(checksum);
  }
  std::string error = comm::first_error(group, errors.first);
  if (!error.empty()) return error;
  sum_over(group, computed);
  const auto datasets = checkpoint_datasets(metadata.model, metadata.kind);
  for (size_t k = 0; k < computed.size(); ++k)
    if (computed[k] != stored[k]) {
      char line[160];
      std::snprintf(line, sizeof line, " (stored %016llx, computed %016llx)",
                    static_cast<unsigned long long>(stored[k]), static_cast<unsigned long long>(computed[k]));
      return "dataset '" + datasets[k].first + "': checksum mismatch" + line;
    }
  return "";
}

std::string read_checkpoint(const std::string& path, comm::Communicator& group, const StateView& state) {
  if (!state.device().is_cpu()) {
    const HostState host = on_host(state, false);
    const std::string problem = read_checkpoint(path, group, host.view);
    if (problem.empty()) upload_state(host, state);
    return problem;
  }
  Handle file = open_parallel(path, group, false);
  if (!comm::all_true(group, file.valid())) return "cannot open '" + path + "'";
  Errors errors;
  const int sections = state.m ? 3 : 1;
  for (int section = 0; section < sections; ++section)
    for (int t = 0; t < model::kNumParamTensors; ++t) {
      if (!has_dataset(state.config, t)) continue;
      const std::string name = dataset_name(state.config, section, t);
      h5::Lock lock(h5::hdf5_mutex());
      Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
      if (!comm::all_true(group, dataset.valid())) return "'" + path + "' has no dataset '" + name + "'";
      const Piece piece = piece_of(state, section, t, false);
      auto [file_space, memory_space] = selection(dataset.get(), piece.slabs);
      const Handle transfer = collective_transfer();
      errors.add(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer.get(),
                         piece.data) >= 0,
                 "reading dataset '" + name + "' of '" + path + "' failed");
    }
  return comm::first_error(group, errors.first);
}

}  // namespace trident::ckpt

