// A checkpoint's metadata: the root attributes of its HDF5 file (docs/CHECKPOINTS.md,
// "Attributes"), in sections, one per part of the run that has state of its own; one table
// (metadata.cpp) for writing, reading, printing and the metadata checksum, and the checks every
// value gets before anything is sized from it (metadata_attributes.hpp: the HDF5 side).
#pragma once

#include <cstdint>
#include <string>

#include "model/config.hpp"

namespace trident::ckpt {

// 2: the lineage attributes and "metadata_checksum". Version 1 files are still read (without
// lineage; their metadata unprotected). One flipped bit cannot turn 2 into 1.
// 3: the model's architecture (model.arch, kv_heads, ffn_hidden, tie_embeddings, rope_theta,
// norm_eps); a version 2 file is GPT-2's, and its checksum covers version 2's attributes.
// 4: Llama 3.1's rotary scaling (model.rope_factor, rope_low_freq_factor, rope_high_freq_factor,
// rope_original_context); a version 3 file has none.
// 5: the interleaved split (layout.virtual_layers); a version 4 file has none (its run's split
// was the deck's).
constexpr int64_t kFormatVersion = 5;

// The sections of the metadata, one per part of a run that has state of its own (ckpt/stateful.hpp):
// each lists its attributes once, in `fields` — name, member, and since when (optional: absent
// in files written before the attribute existed). The file's table is these lists in the order
// of Metadata's sections (metadata.cpp), which is the order metadata_checksum covers.

// The trainer's: where the run is and what it has done.
struct TrainingState {
  int64_t step = 0;                // completed optimizer steps; training resumes with this step
  int64_t tokens_seen = 0;         // training tokens consumed (= step × global batch × T)
  int64_t optimizer_updates = 0;   // AdamW updates made (steps not skipped for NaN/Inf)
  int64_t bad_steps_in_a_row = 0;  // skipped steps before this one, in a row
  int64_t skipped_steps = 0;       // skipped steps over the run
  int64_t seed = 0;                // train.seed: with the step, the position of data and RNG
  // optim.precision of the run that wrote it. The parameters are always the fp32 master
  // weights. Absent in files of earlier versions.
  std::string precision = "fp32";
  template <class F>
  static void fields(F& f) {
    f.integer("step", &TrainingState::step);
    f.integer("tokens_seen", &TrainingState::tokens_seen);
    f.integer("optimizer_updates", &TrainingState::optimizer_updates);
    f.integer("bad_steps_in_a_row", &TrainingState::bad_steps_in_a_row);
    f.integer("skipped_steps", &TrainingState::skipped_steps);
    f.integer("seed", &TrainingState::seed);
    f.text("precision", &TrainingState::precision, true);
  }
};

// fp16's loss scaler (optim/loss_scaler.hpp; loss_scale 0: none). Absent in files of earlier
// versions.
struct ScalerState {
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0, loss_scale_hysteresis_left = 0;
  template <class F>
  static void fields(F& f) {
    f.real("loss_scale", &ScalerState::loss_scale, true);
    f.integer("loss_scale_good_steps", &ScalerState::loss_scale_good_steps, true);
    f.integer("loss_scale_hysteresis_left", &ScalerState::loss_scale_hysteresis_left, true);
  }
};

// The layout of the run that wrote it.
struct LayoutRecord {
  int64_t tensor = 1, pipeline = 1, data = 1, zero = 0;
  template <class F>
  static void fields(F& f) {
    f.integer("layout.tensor", &LayoutRecord::tensor);
    f.integer("layout.pipeline", &LayoutRecord::pipeline);
    f.integer("layout.data", &LayoutRecord::data);
    f.integer("layout.zero", &LayoutRecord::zero);
  }
};

// The balancer's (train/balancer.hpp): the batching of the run that wrote it, which load
// balancing may have changed — blocks per stage, e.g. "3,5,5,3"; and, absent in files of
// earlier versions, sequences per micro-batch (balance.micro_batches; 0: not recorded) and the
// replicas' micro-batches per step (balance.replicas), e.g. "5,3"; and, from format 5, under
// the interleaved schedule, blocks per virtual stage u = chunk·pipeline + stage, e.g.
// "2,3,2,1" (stage_layers their stages' sums; "" with one chunk a stage).
struct BalanceState {
  std::string stage_layers;
  int64_t micro_batch = 0;
  std::string replica_shares;
  std::string virtual_layers;
  template <class F>
  static void fields(F& f) {
    f.text("layout.stage_layers", &BalanceState::stage_layers);
    f.integer("layout.micro_batch", &BalanceState::micro_batch, true);
    f.text("layout.replica_shares", &BalanceState::replica_shares, true);
    f.text("layout.virtual_layers", &BalanceState::virtual_layers, true, 5);
  }
};

// Who wrote it, when, from which deck.
struct Provenance {
  std::string version;     // trident's
  std::string written_at;  // UTC, ISO 8601
  std::string deck;        // the resolved deck of the run that wrote it
  template <class F>
  static void fields(F& f) {
    f.text("trident_version", &Provenance::version);
    f.text("written_at", &Provenance::written_at);
    f.text("deck", &Provenance::deck);
  }
};

// The checkpointer's (docs/CHECKPOINTS.md, "Lineage"): the run (one process start of `trident
// train`) that wrote it, the branch that run extends, and the checkpoint this one follows (its
// id(); empty for the first checkpoint of a run started from step 0). Absent in version 1.
struct LineageIds {
  std::string run_id, branch, parent;
  template <class F>
  static void fields(F& f) {
    f.text("lineage.run_id", &LineageIds::run_id, true);
    f.text("lineage.branch", &LineageIds::branch, true);
    f.text("lineage.parent", &LineageIds::parent, true);
  }
};

// The root attributes of a checkpoint file: its kind, the sections above and the model's shape.
// A section's members are the metadata's own (m.step, m.stage_layers), and a part saves or
// restores its whole section at once (static_cast<BalanceState&>(m) = …).
struct Metadata : TrainingState, ScalerState, LayoutRecord, BalanceState, Provenance, LineageIds {
  std::string kind;  // "fast" (parameters) or "full" (parameters and optimizer state)
  model::GptConfig model;
  int64_t format_version = kFormatVersion;  // of the file it was read from
  template <class F>
  static void fields(F& f) {
    f.text("kind", &Metadata::kind);
  }
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

}  // namespace trident::ckpt
