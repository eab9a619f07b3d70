// What one rank contributes to a checkpoint or receives from one: its slice of the parameters
// and its shard of AdamW's moments, where they live, and the pieces of each dataset they map to.
#pragma once

#include <cstdint>
#include <vector>

#include "ckpt/slab.hpp"
#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "tensor/device.hpp"

namespace trident::ckpt {

// What one rank contributes to a checkpoint, or receives from one.
struct StateView {
  model::GptConfig config;
  model::Partition part;
  // fp32 parameters (the master weights) of elements [params_begin, params_end) of the flat
  // slice (llm.c order): params[i - params_begin]. The whole slice by default (params_end −1);
  // a bf16/fp16 run's master shard under ZeRO.
  float* params = nullptr;
  int64_t params_begin = 0, params_end = -1;
  bool params_owner = false;  // writes its parameters (reading takes them always)
  int64_t params_stop() const { return params_end < 0 ? model::num_parameters(config, part) : params_end; }
  int64_t params_count() const { return params_stop() - params_begin; }
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

// Section 0 (parameters): the slice's part inside [params_begin, params_stop()); 1, 2 (moments):
// inside [moments_begin, moments_end). `writing`: only what this rank owns.
Piece piece_of(const StateView& state, int section, int tensor, bool writing);

// A state on a device in host memory, which HDF5 writes from and reads into: host buffers of the
// state's sizes and a view of them, filled from the device (`download`: what this rank writes) or
// to be uploaded after a read (upload_state).
struct HostState {
  std::vector<float> params, m, v;
  StateView view;
};
HostState on_host(const StateView& state, bool download);
void upload_state(const HostState& host, const StateView& state);

}  // namespace trident::ckpt
