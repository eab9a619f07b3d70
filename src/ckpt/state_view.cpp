// A rank's state and the pieces of the checkpoint's datasets it maps to.
#include "ckpt/state_view.hpp"

#include <algorithm>

#include "kernels/backend.hpp"

namespace trident::ckpt {

model::FlatRanges StateView::ranges(int section) const {
  const model::FlatRanges& given = section == 0 ? params_ranges : moments_ranges;
  return given.empty() ? model::FlatRanges{{0, model::num_parameters(config, part)}} : given;
}

Piece piece_of(const StateView& state, int section, int tensor, bool writing) {
  const auto specs = model::param_specs(state.config, state.part);
  int64_t offset = 0;
  for (int t = 0; t < tensor; ++t) offset += specs[t].count();
  const std::vector<TensorSlab> slabs = tensor_slabs(state.config, state.part, tensor);
  int64_t elements = 0;
  for (const TensorSlab& slab : slabs) elements += slab.elements();
  const bool owner = (specs[tensor].sharded || state.part.rank == 0) && !(tensor == 0 && !state.part.first_stage);
  Piece piece;
  if (elements == 0 || (writing && !owner)) return piece;
  float* values = section == 0 ? state.params : section == 1 ? state.m : state.v;
  const bool values_owner = section == 0 ? state.params_owner : state.moments_owner;
  if (!values || (writing && !values_owner)) return piece;
  // The tensor's parts of the ranges the values cover, in the tensor's order; ascending ranges
  // store them one after the other, from the first one's place in the values.
  std::vector<model::FlatRange> inside;
  int64_t state_at = 0, first_at = -1;
  for (const model::FlatRange& r : state.ranges(section)) {
    const int64_t begin = std::max(offset, r.begin) - offset, end = std::min(offset + elements, r.end) - offset;
    if (begin < end) {
      if (first_at < 0) first_at = state_at + (begin + offset - r.begin);
      inside.push_back({begin, end});
    }
    state_at += r.count();
  }
  if (inside.empty()) return piece;
  const auto copies = model::replica_ranges(state.config, state.part, tensor);
  auto copy = [&copies](int64_t first) {  // a slab lies within a range or outside all of them
    return std::any_of(copies.begin(), copies.end(), [first](const auto& r) { return first >= r.first && first < r.second; });
  };
  int64_t at = 0;  // each slab's first element in the tensor's local order
  for (const TensorSlab& slab : slabs) {
    for (const model::FlatRange& r : inside) {
      const int64_t lo = std::max(r.begin, at), hi = std::min(r.end, at + slab.elements());
      if (lo < hi && lo == at && hi == at + slab.elements()) piece.slabs.push_back(slab.slice);
      else if (lo < hi)
        for (const Hyperslab& h : range_hyperslabs(slab, lo - at, hi - at)) piece.slabs.push_back(h);
    }
    piece.counted.resize(piece.slabs.size(), !copy(at));
    at += slab.elements();
  }
  piece.data = values + first_at;
  return piece;
}

// To write (download): only what this rank writes is copied, and only that is allocated — a
// replica that writes nothing holds no host copy of the state (12 bytes a parameter of an fp32
// model with its moments), as Checkpointer::stage; the other pointers stay the device's, which
// piece_of never follows for values the rank does not own (and which keep every rank's count of
// sections the same). To read: all of it, which every rank reads and uploads.
HostState on_host(const StateView& state, bool download) {
  HostState host;
  host.view = state;
  host.view.copies = kernels::Context{};
  kernels::Context ctx = state.copies;
  if (!download || state.params_owner) {
    host.params.resize(static_cast<size_t>(state.params_count()));
    host.view.params = host.params.data();
    if (download) kernels::download(ctx, host.params.data(), view(state.params, host.params.size(), state.device()));
  }
  if (state.m && (!download || state.moments_owner)) {
    host.m.resize(static_cast<size_t>(state.moments_count())), host.v.resize(host.m.size());
    host.view.m = host.m.data(), host.view.v = host.v.data();
    if (download) {
      kernels::download(ctx, host.m.data(), view(state.m, host.m.size(), state.device()));
      kernels::download(ctx, host.v.data(), view(state.v, host.v.size(), state.device()));
    }
  }
  return host;
}

void upload_state(const HostState& host, const StateView& state) {
  kernels::Context ctx = state.copies;
  kernels::upload(ctx, view(state.params, host.params.size(), state.device()), host.params.data());
  if (!state.m) return;
  kernels::upload(ctx, view(state.m, host.m.size(), state.device()), host.m.data());
  kernels::upload(ctx, view(state.v, host.v.size(), state.device()), host.v.data());
}


}  // namespace trident::ckpt
