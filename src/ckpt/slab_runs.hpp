// for_each_run (declared in ckpt/slab.hpp): an odometer over the outer dimensions' positions,
// runs of `block` elements along the innermost dimension.
#pragma once

#include <cstdint>
#include <vector>

namespace trident::ckpt {

template <class Run>
void for_each_run(const std::vector<int64_t>& shape, const Hyperslab& slab, Run&& run) {
  const int dims = static_cast<int>(shape.size());
  if (dims == 0 || slab.elements() == 0) return;
  // positions[d]: the selected indices of dimension d, in increasing order.
  std::vector<std::vector<int64_t>> positions(dims);
  for (int d = 0; d < dims; ++d)
    for (int64_t c = 0; c < slab.dims[d].count; ++c)
      for (int64_t b = 0; b < slab.dims[d].block; ++b)
        positions[d].push_back(slab.dims[d].start + c * slab.dims[d].stride + b);
  std::vector<int64_t> stride_of(dims, 1);  // row-major element strides of the whole tensor
  for (int d = dims - 2; d >= 0; --d) stride_of[d] = stride_of[d + 1] * shape[d + 1];
  const SlabDim& inner = slab.dims[dims - 1];
  std::vector<size_t> at(dims - 1, 0);  // odometer over dimensions 0 .. dims-2
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d < dims - 1; ++d) offset += positions[d][at[d]] * stride_of[d];
    for (int64_t c = 0; c < inner.count; ++c) run(offset + inner.start + c * inner.stride, inner.block);
    int d = dims - 2;
    while (d >= 0 && ++at[d] == positions[d].size()) at[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace trident::ckpt
