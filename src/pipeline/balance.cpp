// Balance figures and the min-max allocation of blocks to stages and micro-batches to replicas.
#include "pipeline/balance.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace trident::pipeline {
namespace {

double ratio(const std::vector<double>& forward, const std::vector<double>& backward) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (size_t i = 0; i < forward.size(); ++i) {
    lo = std::min(lo, forward[i] + backward[i]);
    hi = std::max(hi, forward[i] + backward[i]);
  }
  return forward.size() < 2 || lo <= 0 ? 1.0 : hi / lo;
}

}  // namespace

double BalanceFigures::stage_ratio() const { return ratio(stage_forward_ms, stage_backward_ms); }
double BalanceFigures::replica_ratio() const { return ratio(replica_forward_ms, replica_backward_ms); }

BalanceFigures summarise(const std::vector<RankTimes>& per_rank, const std::vector<int>& stage_of,
                         const std::vector<int>& replica_of, int stages, int replicas) {
  BalanceFigures f;
  f.stage_forward_ms.assign(stages, 0.0), f.stage_backward_ms.assign(stages, 0.0), f.stage_edge_ms.assign(stages, 0.0);
  f.replica_forward_ms.assign(replicas, 0.0), f.replica_backward_ms.assign(replicas, 0.0);
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const RankTimes& t = per_rank[r];
    const int s = stage_of[r], d = replica_of[r];
    f.stage_forward_ms[s] = std::max(f.stage_forward_ms[s], t.forward_ms);
    f.stage_backward_ms[s] = std::max(f.stage_backward_ms[s], t.backward_ms);
    f.stage_edge_ms[s] = std::max(f.stage_edge_ms[s], t.edge_ms);
    f.replica_forward_ms[d] = std::max(f.replica_forward_ms[d], t.forward_ms);
    f.replica_backward_ms[d] = std::max(f.replica_backward_ms[d], t.backward_ms);
  }
  return f;
}

std::vector<int> minmax_allocation(const std::vector<double>& unit_ms, const std::vector<double>& fixed_ms,
                                   int total, const std::vector<int>& current) {
  const int workers = static_cast<int>(unit_ms.size());
  if (workers == 0 || total < workers || fixed_ms.size() != unit_ms.size())
    throw std::invalid_argument("minmax_allocation: every worker needs a unit and a cost");
  std::vector<int> counts(workers, 1);
  for (int given = workers; given < total; ++given) {
    int best = 0;
    for (int w = 1; w < workers; ++w)
      if (fixed_ms[w] + (counts[w] + 1) * unit_ms[w] < fixed_ms[best] + (counts[best] + 1) * unit_ms[best]) best = w;
    ++counts[best];
  }
  // The greedy fixes the slowest worker's time; any allocation whose workers all stay within
  // it is as good, and `current` is the one to keep if it is among them.
  if (!current.empty() && predicted_max_ms(unit_ms, fixed_ms, current) <= predicted_max_ms(unit_ms, fixed_ms, counts))
    return current;
  return counts;
}

double predicted_max_ms(const std::vector<double>& unit_ms, const std::vector<double>& fixed_ms,
                        const std::vector<int>& counts) {
  double slowest = 0;
  for (size_t w = 0; w < counts.size(); ++w) slowest = std::max(slowest, fixed_ms[w] + counts[w] * unit_ms[w]);
  return slowest;
}

void stage_costs(const BalanceFigures& figures, const std::vector<int>& stage_layers, std::vector<double>* unit_ms,
                 std::vector<double>* fixed_ms) {
  const size_t stages = stage_layers.size();
  unit_ms->assign(stages, 0.0), fixed_ms->assign(stages, 0.0);
  for (size_t s = 0; s < stages; ++s) {
    const double edge = std::min(figures.stage_edge_ms[s], figures.stage_ms(static_cast<int>(s)));
    (*fixed_ms)[s] = edge;
    (*unit_ms)[s] = (figures.stage_ms(static_cast<int>(s)) - edge) / stage_layers[s];
  }
}

std::string split_text(const std::vector<int>& counts) {
  std::string text;
  for (int n : counts) text += (text.empty() ? "" : ",") + std::to_string(n);
  return text;
}

}  // namespace trident::pipeline
