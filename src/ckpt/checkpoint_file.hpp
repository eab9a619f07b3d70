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
// data-parallel replica 0; moments by the owner of their ZeRO-1 shard (replica 0 without ZeRO).
// Reading, every rank takes what it holds in its own (possibly different) layout: that is all
// resharding is.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/device.hpp"

namespace trident::ckpt {

// 2: the lineage attributes and "metadata_checksum". Version 1 files are still read (without
// lineage; their metadata unprotected). One flipped bit cannot turn 2 into 1.
constexpr int64_t kFormatVersion = 2;

struct Metadata {
  std::string kind;  // "fast" (parameters) or "full" (parameters and optimizer state)
  int64_t step = 0;                // completed optimizer steps; training resumes with this step
  int64_t tokens_seen = 0;         // training tokens consumed (= step × global batch × T)
  int64_t optimizer_updates = 0;   // AdamW updates made (steps not skipped for NaN/Inf)
  int64_t bad_steps_in_a_row = 0;  // skipped steps before this one, in a row
  int64_t skipped_steps = 0;       // skipped steps over the run
  int64_t seed = 0;                // train.seed: with the step, the position of data and RNG
  // optim.precision of the run that wrote it, and fp16's loss scaler (loss_scale 0: none). The
  // parameters are always the fp32 master weights. Absent in files of earlier versions.
  std::string precision = "fp32";
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0, loss_scale_hysteresis_left = 0;
  model::GptConfig model;
  int64_t tensor = 1, pipeline = 1, data = 1, zero = 0;
  std::string stage_layers;  // blocks per stage, e.g. "3,5,5,3"
  // The batching of the run that wrote it, where load balancing changed it (absent in files of
  // earlier versions): sequences per micro-batch (balance.micro_batches; 0: not recorded) and
  // the replicas' micro-batches per step (balance.replicas), e.g. "5,3".
  int64_t micro_batch = 0;
  std::string replica_shares;
  std::string deck;          // the resolved deck of the run that wrote it
  std::string version;       // trident's
  std::string written_at;    // UTC, ISO 8601
  // Lineage (docs/CHECKPOINTS.md, "Lineage"): the run (one process start of `trident train`)
  // that wrote it, the branch that run extends, and the checkpoint this one follows (its
  // id, checkpoint_id(); empty for the first checkpoint of a run started from step 0).
  std::string run_id, branch, parent;
  int64_t format_version = kFormatVersion;  // of the file it was read from
  // This checkpoint's identity, unique across runs: "<run_id>/step-00000120.full".
  std::string id() const;
  // Key = value lines (the root attributes as text), and back: for broadcasting and printing.
  std::string to_text() const;
  static Metadata from_text(const std::string& text);
};

// What one rank contributes to a checkpoint, or receives from one.
struct StateView {
  model::GptConfig config;
  model::Partition part;
  float* params = nullptr;  // (num_parameters(config, part)) this rank's slice, llm.c order
  bool params_owner = false;  // writes its parameter slice (reading takes it always)
  // AdamW moments of elements [moments_begin, moments_end) of the flat slice: m[i - begin].
  // Null: none (a fast checkpoint; or a reader that re-initialises them).
  float* m = nullptr;
  float* v = nullptr;
  int64_t moments_begin = 0, moments_end = 0;
  bool moments_owner = false;  // writes its moments
  // Where params, m and v live. HDF5 writes from host memory and reads into it: a state on a
  // device goes through host copies (downloaded before a write, uploaded after a read) by the
  // device's kernel backend (null: the CPU's).
  Device device;
  kernels::Backend* backend = nullptr;
};

struct WriteResult {
  std::string error;        // empty: written; else what failed (the same text on every rank)
  int64_t bytes = 0;        // of tensor data, all ranks together
  double seconds = 0;       // create, write, flush, close, fsync
};

// Collective over comm: writes `path` (created or truncated) and fsyncs it. Never throws and
// never leaves a rank behind in a collective: errors are collected and agreed on at the end.
WriteResult write_checkpoint(const std::string& path, MPI_Comm comm, const StateView& state,
                             const Metadata& metadata);

// Collective over comm: opens the file, checks the metadata (its checksum, the file name's
// step and kind), that every dataset the metadata promises is
// there with the model's shapes, recomputes every checksum (each rank reading 1/n of each
// dataset) and the "complete" mark. Returns "" for a sound file, else the first problem.
std::string verify_checkpoint(const std::string& path, MPI_Comm comm);

// Reads the root attributes (one rank, no MPI) and checks them against metadata_checksum and
// the file name (step-<step>.<kind>.h5 must agree with the attributes). Throws
// std::runtime_error naming the file and the problem.
Metadata read_metadata(const std::string& path);

// The 64-bit FNV-1a checksum of the metadata (every attribute but "complete" and the
// checksums themselves), as stored in "metadata_checksum".
uint64_t metadata_checksum(const Metadata& metadata);

// "" when `path`'s file name is not step-<N>.<kind>.h5 or agrees with `metadata`; else why not.
std::string name_mismatch(const std::string& path, const Metadata& metadata);

// Collective over comm: fills state.params (and state.m / state.v when not null) from the
// file. Returns "" or the error (the same on every rank).
std::string read_checkpoint(const std::string& path, MPI_Comm comm, const StateView& state);

// The datasets of a checkpoint of this kind, e.g. "params/wte", "adamw_m/blocks.qkvw", with
// their global shapes.
std::vector<std::pair<std::string, std::vector<int64_t>>> checkpoint_datasets(const model::GptConfig& config,
                                                                              const std::string& kind);

}  // namespace trident::ckpt
