// A rank's state and the pieces of the checkpoint's datasets it maps to.
#include "ckpt/state_view.hpp"

#include <algorithm>

#include "kernels/backend.hpp"

namespace trident::ckpt {

Piece piece_of(const StateView& state, int section, int tensor, bool writing) {
  const auto specs = model::param_specs(state.config, state.part);
  int64_t offset = 0;
  for (int t = 0; t < tensor; ++t) offset += specs[t].count();
  const TensorSlab slab = tensor_slab(state.config, state.part, tensor);
  const bool owner = (specs[tensor].sharded || state.part.rank == 0) && !(tensor == 0 && !state.part.first_stage);
  Piece piece;
  if (slab.elements() == 0 || (writing && !owner)) return piece;
  if (section == 0) {
    if (writing && !state.params_owner) return piece;
    piece.slabs = {slab.slice};
    piece.data = state.params + offset;
    return piece;
  }
  float* moments = section == 1 ? state.m : state.v;
  if (!moments || (writing && !state.moments_owner)) return piece;
  const int64_t begin = std::max(offset, state.moments_begin) - offset;
  const int64_t end = std::min(offset + slab.elements(), state.moments_end) - offset;
  if (begin >= end) return piece;
  piece.slabs = range_hyperslabs(slab, begin, end);
  piece.data = moments + (offset + begin - state.moments_begin);
  return piece;
}

HostState on_host(const StateView& state, bool download) {
  HostState host;
  host.params.resize(static_cast<size_t>(model::num_parameters(state.config, state.part)));
  if (state.m) host.m.resize(static_cast<size_t>(state.moments_end - state.moments_begin)), host.v.resize(host.m.size());
  host.view = state;
  host.view.device = Device{};
  host.view.backend = nullptr;
  host.view.params = host.params.data();
  host.view.m = state.m ? host.m.data() : nullptr;
  host.view.v = state.m ? host.v.data() : nullptr;
  if (!download) return host;
  kernels::Context ctx;
  ctx.backend = state.backend;
  if (state.params_owner) kernels::download(ctx, host.params.data(), view(state.params, host.params.size(), state.device));
  if (state.m && state.moments_owner) {
    kernels::download(ctx, host.m.data(), view(state.m, host.m.size(), state.device));
    kernels::download(ctx, host.v.data(), view(state.v, host.v.size(), state.device));
  }
  return host;
}

void upload_state(const HostState& host, const StateView& state) {
  kernels::Context ctx;
  ctx.backend = state.backend;
  kernels::upload(ctx, view(state.params, host.params.size(), state.device), host.params.data());
  if (!state.m) return;
  kernels::upload(ctx, view(state.m, host.m.size(), state.device), host.m.data());
  kernels::upload(ctx, view(state.v, host.v.size(), state.device), host.v.data());
}


}  // namespace trident::ckpt
