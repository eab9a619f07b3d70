// A checkpoint's metadata: the root attributes of its HDF5 file (docs/CHECKPOINTS.md,
// "Attributes"), one table for writing, reading, printing and the metadata checksum, and the
// checks every value gets before anything is sized from it.
#pragma once

#include <cstdint>
#include <string>

#include "core/h5.hpp"
#include "model/config.hpp"

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

// The 64-bit FNV-1a checksum of the metadata (every attribute but "complete" and the
// checksums themselves), as stored in "metadata_checksum".
uint64_t metadata_checksum(const Metadata& metadata);

// "" when `path`'s file name is not step-<N>.<kind>.h5 or agrees with `metadata`; else why not.
std::string name_mismatch(const std::string& path, const Metadata& metadata);

// The attributes of an open file: writes them all (with format_version, checksum_algorithm and
// metadata_checksum), "" or what failed.
std::string write_metadata(hid_t file, const Metadata& metadata);
// Reads them into `metadata` and checks them (the checksum, every value for sense): "" or what
// is missing, altered or impossible.
std::string read_metadata_of(hid_t file, Metadata& metadata);

}  // namespace trident::ckpt
