// The model's gradients in backward order (both architectures: the tensor slots of model/params.hpp).
#include "dp/gpt2_segments.hpp"

namespace trident::dp {

namespace {

// Where segment (tensor, layer) lies (layer −1: the whole tensor), its elements of `dtype`.
using Memory = std::function<void*(size_t tensor, int layer, int64_t flat_offset)>;

std::vector<GradientSegment> segments_of(const model::GptConfig& config, const model::Partition& slice,
                                         const Memory& memory, bool final_norm_last, DType dtype = DType::f32) {
  const auto specs = model::param_specs(config, slice);
  std::vector<int64_t> offset(specs.size(), 0);
  for (size_t t = 1; t < specs.size(); ++t) offset[t] = offset[t - 1] + specs[t - 1].count();
  const int L = slice.layers(config);  // this stage's blocks, numbered from 0 as backward reports them
  // wte here and on another stage: the embedding on the first, the classifier on the last.
  const bool tied_copy = model::tied_head(config) && slice.first_stage != slice.last_stage;
  std::vector<GradientSegment> segments;
  auto add = [&](size_t tensor, int layer, int event) {
    const int64_t per_layer = specs[tensor].count() / (layer < 0 ? 1 : L);
    const int64_t at = offset[tensor] + (layer < 0 ? 0 : layer * per_layer);
    const std::string name = specs[tensor].name + (layer < 0 ? "" : "[" + std::to_string(layer) + "]");
    const bool tied = tied_copy && tensor == model::kWte;
    segments.push_back({name, memory(tensor, layer, at), at, per_layer, dtype, event, tied});
  };
  for (int event = L - 1; event >= -1; --event)
    for (size_t t = 0; t < specs.size(); ++t) {
      if (specs[t].count() == 0) continue;  // a tensor this stage (or architecture) lacks
      const bool per_block = model::is_block_tensor(int(t));
      const bool final_layernorm = t == model::kLnfw || t == model::kLnfb;
      const int norm_event = final_norm_last ? -1 : L - 1;
      if (event >= 0 && per_block) add(t, event, event);
      if (event == norm_event && final_layernorm) add(t, -1, event);
      if (event == -1 && !per_block && !final_layernorm) add(t, -1, event);  // wte, wpe, head
    }
  return segments;
}

}  // namespace

std::vector<GradientSegment> gpt2_gradient_segments(const model::GptConfig& config,
                                                    const model::Partition& slice, float* grads) {
  return segments_of(config, slice, [grads](size_t, int, int64_t at) -> void* { return grads ? grads + at : nullptr; },
                     false);
}

std::vector<GradientSegment> gpt2_slot_segments(const model::GptConfig& config, const model::Partition& slice,
                                                const model::ParamViews& outside,
                                                const std::function<model::ParamViews(int)>& block_gradients) {
  return segments_of(config, slice, [&](size_t tensor, int layer, int64_t) -> void* {
    return model::tensor_view(layer < 0 ? outside : block_gradients(layer), int(tensor));
  }, true);
}

std::vector<GradientSegment> gpt2_parameter_segments(const model::GptConfig& config, const model::Partition& slice,
                                                     DType dtype, const std::function<Tensor(int, int)>& memory) {
  return segments_of(config, slice, [&](size_t tensor, int layer, int64_t) -> void* {
    return memory(layer, int(tensor)).data;
  }, true, dtype);
}

}  // namespace trident::dp
