// for_each_run (declared in ckpt/slab.hpp): trailing dimensions the hyperslab takes whole merge
// into the runs (a whole tensor is one run); an odometer walks the positions of the dimensions
// before them.
#pragma once

#include <cstdint>
#include <vector>

namespace trident::ckpt {

template <class Run>
void for_each_run(const std::vector<int64_t>& shape, const Hyperslab& slab, Run&& run) {
  const int dims = static_cast<int>(shape.size());
  if (dims == 0 || slab.elements() == 0) return;
  auto whole = [&](int d) {
    const SlabDim& s = slab.dims[d];
    return s.start == 0 && s.count == 1 && s.block == shape[d];
  };
  int last = dims - 1;  // the runs lie along dimension `last`, each `inner` elements per index
  int64_t inner = 1;
  while (last > 0 && whole(last)) inner *= shape[last--];
  // positions[d]: the selected indices of dimension d < last, in increasing order.
  std::vector<std::vector<int64_t>> positions(last);
  for (int d = 0; d < last; ++d)
    for (int64_t c = 0; c < slab.dims[d].count; ++c)
      for (int64_t b = 0; b < slab.dims[d].block; ++b)
        positions[d].push_back(slab.dims[d].start + c * slab.dims[d].stride + b);
  std::vector<int64_t> stride_of(last + 1, inner);  // row-major element strides of the whole tensor
  for (int d = last - 1; d >= 0; --d) stride_of[d] = stride_of[d + 1] * shape[d + 1];
  const SlabDim& along = slab.dims[last];
  std::vector<size_t> at(last, 0);  // odometer over dimensions 0 .. last-1
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d < last; ++d) offset += positions[d][at[d]] * stride_of[d];
    for (int64_t c = 0; c < along.count; ++c) run(offset + (along.start + c * along.stride) * inner, along.block * inner);
    int d = last - 1;
    while (d >= 0 && ++at[d] == positions[d].size()) at[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace trident::ckpt
