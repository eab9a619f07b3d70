// The tied-embedding sum, the global gradient norm and the bad-step agreement of a step.
#include "dp/finalize_gradients.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.hpp"
#include "model/params.hpp"

namespace trident::dp {

void tie_embedding_gradients(model::Gpt2& model, comm::Communicator* embedding) {
  if (!embedding) return;
  const model::ParamViews grads = model::param_views(model.config(), model.grads(), model.partition());
  const size_t count = static_cast<size_t>(model::param_specs(model.config(), model.partition())[0].count());
  embedding->all_reduce(grads.wte, count, DType::f32, comm::Op::Sum, model.stream()).wait();
}

GradientNorm global_grad_norm(model::Gpt2& model, const Shard& shard, float clip, double gradient_scale,
                              comm::Communicator& data, comm::Communicator& tensor, comm::Communicator& pipeline) {
  kernels::Context ctx = model.context();
  // Each tensor's part of the shard, in one call (on a device one launch and one transfer).
  std::vector<Tensor> parts;
  std::vector<bool> split;  // over the tensor group, or replicated on it
  int64_t offset = 0;
  const model::Partition& part = model.partition();
  for (const model::ParamSpec& spec : model::param_specs(model.config(), part)) {
    const int64_t begin = std::max(offset, shard.begin), end = std::min(offset + spec.count(), shard.end);
    const bool tied_copy = spec.name == "wte" && part.last_stage && !part.first_stage;  // counted on the first stage
    if (begin < end && !tied_copy) {
      parts.push_back(view(model.grads() + begin, static_cast<size_t>(end - begin), model.device()));
      split.push_back(spec.sharded);
    }
    offset += spec.count();
  }
  double squares[2] = {0.0, 0.0};  // split over the tensor group, replicated on it
  const std::vector<double> sums = kernels::sums_of_squares(ctx, parts);
  for (size_t i = 0; i < sums.size(); ++i) squares[split[i] ? 0 : 1] += sums[i];
  if (shard.count() != model.num_parameters()) data.all_reduce(squares, 2, DType::f64, comm::Op::Sum, Stream{}).wait();
  if (tensor.size() > 1) tensor.all_reduce(squares, 1, DType::f64, comm::Op::Sum, Stream{}).wait();
  if (pipeline.size() > 1)  // every stage holds different tensors
    pipeline.all_reduce(squares, 2, DType::f64, comm::Op::Sum, Stream{}).wait();
  GradientNorm result;
  result.norm = static_cast<float>(std::sqrt(squares[0] + squares[1]) / gradient_scale);
  if (clip > 0.0f && result.norm > clip) result.clip_factor = clip / result.norm;
  return result;
}

bool any_rank_not_finite(float loss, float norm, comm::Communicator& world) {
  double bad = !std::isfinite(loss) || !std::isfinite(norm);
  world.all_reduce(&bad, 1, DType::f64, comm::Op::Max, Stream{}).wait();
  return bad != 0.0;
}

}  // namespace trident::dp
