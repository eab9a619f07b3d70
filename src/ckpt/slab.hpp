// Where a rank's slice of a parameter tensor lies in the whole tensor, as HDF5 hyperslabs.
//
// Every slice a rank holds (docs/MODEL.md, model::Partition) is one regular hyperslab of the
// whole tensor — per dimension HDF5's (start, stride, count, block): a stage's blocks are a
// range of the layer dimension; a tensor-parallel rank's vocabulary rows, MLP rows or input
// columns are a range of one dimension; its q, k and v rows of qkvw are three blocks of C/p rows
// at stride C. The slice's elements, in the order of the rank's flat buffer, are the
// hyperslab's elements in row-major order of the whole tensor (the map from local to global
// position is monotone), so a slice is written or read with one hyperslab and a contiguous
// memory buffer.
//
// ZeRO-1 shards and the verification ranges cut a flat range [begin, end) out of a slice: in the
// slice's "expanded" coordinates (each strided dimension split into (count, block)) such a
// range is at most 2·dims − 1 boxes, each again a regular hyperslab; their union, still in
// row-major order, is the range.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.hpp"
#include "model/params.hpp"

namespace trident::ckpt {

struct SlabDim {
  int64_t start = 0, stride = 1, count = 1, block = 0;  // HDF5's four numbers for one dimension
};

// One hyperslab of a tensor of `shape`.
struct Hyperslab {
  std::vector<SlabDim> dims;
  int64_t elements() const;
};

struct TensorSlab {
  std::vector<int64_t> global_shape;  // the whole tensor
  Hyperslab slice;                    // this rank's part of it
  int64_t elements() const { return slice.elements(); }
};

// Rank `slice`'s part of parameter tensor t (llm.c order) of the model `config`: one slab, or for
// a per-block tensor of an interleaved stage one per chunk (its blocks a range of the first
// dimension), in the order the stage stacks them.
std::vector<TensorSlab> tensor_slabs(const model::GptConfig& config, const model::Partition& slice, int tensor);
// The whole of a tensor of this shape (what a reader that verifies a file uses).
TensorSlab whole_slab(const std::vector<int64_t>& shape);

// Hyperslabs, in order, whose union is elements [begin, end) of the slab's slice in its own
// (flat, row-major) order. Empty for an empty range.
std::vector<Hyperslab> range_hyperslabs(const TensorSlab& slab, int64_t begin, int64_t end);

// Calls run(global_begin, length) for the hyperslab's elements, in order, as runs of elements
// contiguous in the whole tensor (global_begin: row-major flat index in `shape`).
template <class Run>
void for_each_run(const std::vector<int64_t>& shape, const Hyperslab& slab, Run&& run);

}  // namespace trident::ckpt

#include "ckpt/slab_runs.hpp"

namespace trident::ckpt {

}  // namespace trident::ckpt
