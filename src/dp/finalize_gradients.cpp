// The global gradient norm and the bad-step agreement of a step.
#include "dp/finalize_gradients.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.hpp"
#include "model/params.hpp"

namespace trident::dp {

void sum_gradient_squares(model::Transformer& model, const model::FlatRanges& owned, const float* owned_gradients,
                          const Tensor& squares, comm::Communicator& data, comm::Communicator& tensor,
                          comm::Communicator& pipeline) {
  kernels::Context ctx = model.context();
  // Each tensor's part of the owned ranges, in one call (on a device one launch, nothing read).
  std::vector<Tensor> parts;
  std::vector<int> group;  // 0: split over the tensor group, 1: replicated on it
  int64_t offset = 0;
  const model::Partition& part = model.partition();
  const auto specs = model::param_specs(model.config(), part);
  for (int t = 0; t < model::kNumParamTensors; ++t) {
    const model::ParamSpec& spec = specs[t];
    const bool tied_copy = spec.name == "wte" && part.last_stage && !part.first_stage;  // counted on the first stage
    // The tensor's ranges, but the copies of replicated key/value heads (counted on their first replica).
    std::vector<std::pair<int64_t, int64_t>> ranges;
    int64_t from = 0;
    for (const auto& [copy_begin, copy_end] : model::replica_ranges(model.config(), part, t))
      ranges.push_back({from, copy_begin}), from = copy_end;
    ranges.push_back({from, spec.count()});
    for (const auto& [first, last] : ranges) {
      int64_t state = 0;  // the owned range's first element in owned_gradients
      for (const model::FlatRange& own : owned) {
        const int64_t begin = std::max(offset + first, own.begin), end = std::min(offset + last, own.end);
        if (begin < end && !tied_copy) {
          const float* at = owned_gradients ? owned_gradients + state + (begin - own.begin) : model.grads() + begin;
          parts.push_back(view(at, static_cast<size_t>(end - begin), model.device()));
          group.push_back(spec.sharded ? 0 : 1);
        }
        state += own.count();
      }
    }
    offset += spec.count();
  }
  kernels::sums_of_squares_into(ctx, squares, parts, group);
  double* sums = squares.as<double>();
  const Stream stream = model.stream();
  if (model::total_count(owned) != model.num_parameters() && data.size() > 1)
    data.all_reduce(sums, 2, DType::f64, comm::Op::Sum, stream).wait();
  if (tensor.size() > 1) tensor.all_reduce(sums, 1, DType::f64, comm::Op::Sum, stream).wait();
  if (pipeline.size() > 1)  // every stage holds different tensors
    pipeline.all_reduce(sums, 2, DType::f64, comm::Op::Sum, stream).wait();
}

void agree_on_skip(model::Transformer& model, double* flag, comm::Communicator& world) {
  if (world.size() > 1) world.all_reduce(flag, 1, DType::f64, comm::Op::Max, model.stream()).wait();
}

}  // namespace trident::dp
