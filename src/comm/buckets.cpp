// Planning the gradient buckets.
#include "comm/buckets.hpp"

#include <algorithm>

namespace trident::comm {

std::vector<Bucket> plan_buckets(const model::GptConfig& config, const model::Partition& slice, double bucket_mb) {
  const auto specs = model::param_specs(config, slice);
  std::vector<int64_t> offset(specs.size(), 0);
  for (size_t t = 1; t < specs.size(); ++t) offset[t] = offset[t - 1] + specs[t - 1].count();
  const int64_t target = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * 1048576.0 / sizeof(float)));
  const int L = slice.layers(config);  // this stage's blocks, numbered from 0 as backward reports them
  std::vector<Bucket> buckets;
  Bucket current;
  auto add = [&](size_t tensor, int layer) {
    const int64_t per_layer = specs[tensor].count() / (layer < 0 ? 1 : L);
    current.segments.push_back({offset[tensor] + (layer < 0 ? 0 : layer * per_layer), per_layer});
    current.elements += per_layer;
  };
  for (int event = L - 1; event >= -1; --event) {
    for (size_t t = 0; t < specs.size(); ++t) {
      const bool per_block = specs[t].name.rfind("blocks.", 0) == 0;
      const bool final_layernorm = specs[t].name == "lnfw" || specs[t].name == "lnfb";
      if (event >= 0 && per_block) add(t, event);
      if (event == L - 1 && final_layernorm) add(t, -1);
      if (event == -1 && !per_block && !final_layernorm) add(t, -1);  // wte, wpe
    }
    current.ready_event = event;
    if (current.elements >= target || event == -1) {
      buckets.push_back(std::move(current));
      current = Bucket{};
    }
  }
  return buckets;
}

}  // namespace trident::comm
