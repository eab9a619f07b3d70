// One checkpoint = one HDF5 file, written and read by all ranks together with parallel HDF5
// (MPI-IO, collective transfers).
//
// Layout of the file (docs/CHECKPOINTS.md):
//   /params/<name>    float32, the whole tensor's shape (names and shapes of docs/MODEL.md)
//   /adamw_m/<name>   float32, same shape: AdamW's first moment   (full checkpoints only)
//   /adamw_v/<name>   float32, same shape: AdamW's second moment  (full checkpoints only)
// Every dataset carries "checksum" (ckpt/checksum.hpp); the root carries the Metadata as
// attributes, "metadata_checksum" over all of them (format version 2 on), "complete" = 1
// written last.
//
// Who writes what: each global element exactly once. A rank writes its slice of a tensor
// (ckpt/slab.hpp) when it owns it: tensor-parallel-split tensors by every tensor rank,
// replicated ones by tensor rank 0, the tied wte by the first stage only; parameters by
// data-parallel replica 0; moments by the replica owning them under ZeRO (replica 0 without ZeRO).
// Reading, every rank takes what it holds in its own (possibly different) layout: that is all
// resharding is.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/metadata.hpp"
#include "ckpt/state_view.hpp"
#include "comm/communicator.hpp"

namespace trident::ckpt {

struct WriteResult {
  std::string error;        // empty: written; else what failed (the same text on every rank)
  int64_t bytes = 0;        // of tensor data, all ranks together
  double seconds = 0;       // create, write, flush, close, fsync
};

// Collective over `group` (a plain MPI communicator: comm/world.hpp): writes `path` (created or
// truncated) and fsyncs it. Never throws and never leaves a rank behind in a collective: errors are
// collected and agreed on at the end.
WriteResult write_checkpoint(const std::string& path, comm::Communicator& group, const StateView& state,
                             const Metadata& metadata);

// Collective over `group` (a plain MPI communicator: comm/world.hpp): opens the file, checks the
// metadata (its checksum, the file name's step and kind), that every dataset the metadata promises
// is there with the model's shapes, recomputes every checksum (each rank reading 1/n of each
// dataset) and the "complete" mark. Returns "" for a sound file, else the first problem.
std::string verify_checkpoint(const std::string& path, comm::Communicator& group);

// Reads the root attributes (one rank, no MPI) and checks them against metadata_checksum and
// the file name (step-<step>.<kind>.h5 must agree with the attributes). Throws
// std::runtime_error naming the file and the problem.
Metadata read_metadata(const std::string& path);

// Collective over `group` (a plain MPI communicator: comm/world.hpp): fills state.params (and
// state.m / state.v when not null) from the file. Returns "" or the error (the same on every rank).
std::string read_checkpoint(const std::string& path, comm::Communicator& group, const StateView& state);

}  // namespace trident::ckpt
