// What one rank contributes to a checkpoint or receives from one: its slice of the parameters
// and its shard of AdamW's moments, where they live, and the pieces of each dataset they map to.
#pragma once

#include <cstdint>
#include <vector>

#include "ckpt/slab.hpp"
#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/flat_ranges.hpp"
#include "model/params.hpp"
#include "tensor/device.hpp"

namespace trident::ckpt {

// What one rank contributes to a checkpoint, or receives from one.
struct StateView {
  model::GptConfig config;
  model::Partition part;
  // fp32 parameters (the master weights) of the ranges params_ranges of the flat slice (llm.c
  // order), range after range. The whole slice by default (empty); a bf16/fp16 run's master
  // ranges under ZeRO (optim::AdamW::owned()).
  float* params = nullptr;
  model::FlatRanges params_ranges;
  bool params_owner = false;  // writes its parameters (reading takes them always)
  // AdamW moments of the ranges moments_ranges (empty: the whole slice), range after range.
  // Null: none (a fast checkpoint; or a reader that re-initialises them).
  float* m = nullptr;
  float* v = nullptr;
  model::FlatRanges moments_ranges;
  bool moments_owner = false;  // writes its moments
  // The ranges of section 0 (parameters) or 1, 2 (moments): the whole slice for none given.
  model::FlatRanges ranges(int section) const;
  int64_t params_count() const { return model::total_count(ranges(0)); }
  int64_t moments_count() const { return model::total_count(ranges(1)); }
  // Where params, m and v live: the backend and the stream of their writers (the optimizer, the
  // model), whose device holds them; the default, host memory. HDF5 writes from host memory and
  // reads into it: a state on a device goes through host copies (downloaded before a write,
  // uploaded after a read) by that backend on that stream — after the writers' work in the
  // stream's order, not by the legacy default stream's implicit synchronization.
  kernels::Context copies;
  Device device() const { return copies.stream.device; }
};

// What this rank moves for one dataset: the hyperslabs of the whole tensor and the memory they
// map to (their elements in order).
struct Piece {
  std::vector<Hyperslab> slabs;
  // Per slab: false where its values are a copy another rank writes too (model::replica_ranges:
  // the same values, left out of the dataset's checksum so that it counts each element once).
  std::vector<bool> counted;
  float* data = nullptr;
  int64_t elements() const {
    int64_t n = 0;
    for (const Hyperslab& s : slabs) n += s.elements();
    return n;
  }
};

// Section 0 (parameters): the tensor's part inside ranges(0); 1, 2 (moments): inside ranges(1).
// `writing`: only what this rank owns.
Piece piece_of(const StateView& state, int section, int tensor, bool writing);

// A state on a device in host memory, which HDF5 writes from and reads into: host buffers and a
// view of them, filled from the device (`download`: what this rank writes, and only that
// allocated) or of the state's sizes, to be uploaded after a read (upload_state).
struct HostState {
  std::vector<float> params, m, v;
  StateView view;
};
HostState on_host(const StateView& state, bool download);
void upload_state(const HostState& host, const StateView& state);

}  // namespace trident::ckpt
