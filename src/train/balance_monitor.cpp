// The balance measurement: per-rank times gathered on every rank, summarised, recorded.
#include "train/balance_monitor.hpp"

#include <cstdio>

#include "core/clock.hpp"
#include "core/log.hpp"

namespace trident {
namespace {

std::string list_ms(const std::vector<double>& forward, const std::vector<double>& backward) {
  std::string text;
  char value[32];
  for (size_t i = 0; i < forward.size(); ++i) {
    std::snprintf(value, sizeof value, "%s%.2f", i ? ", " : "", forward[i] + backward[i]);
    text += value;
  }
  return text;
}

}  // namespace

std::optional<pipeline::BalanceFigures> BalanceMonitor::add_step(const pipeline::StepTimes& times,
                                                                 int64_t micro_batches, int64_t completed,
                                                                 comm::Communicator& world) {
  if (settings_.interval <= 0) return std::nullopt;
  if (micro_batches > 0) {
    const double per = 1e3 / static_cast<double>(micro_batches);
    forward_ms_.push_back(times.forward_seconds * per);
    backward_ms_.push_back(times.backward_seconds * per);
    edge_ms_.push_back(times.edge_seconds * per);
  }
  if (completed % settings_.interval != 0) return std::nullopt;
  // (3) per rank: the medians; a rank that measured nothing (the interval held only the warm-up
  // step) sends zeros.
  const double mine[3] = {median(forward_ms_), median(backward_ms_), median(edge_ms_)};
  forward_ms_.clear(), backward_ms_.clear(), edge_ms_.clear();
  const int world_size = grid_.world_size();
  std::vector<double> all(static_cast<size_t>(3) * world_size);  // (world, 3)
  world.all_gather_values(mine, all.data(), 3, DType::f64, Stream{}).wait();
  std::vector<pipeline::RankTimes> per_rank(world_size);
  std::vector<int> stage_of(world_size), replica_of(world_size);
  for (int r = 0; r < world_size; ++r) {
    per_rank[r] = {all[3 * r], all[3 * r + 1], all[3 * r + 2]};
    stage_of[r] = grid_.coord_of(r).pp;
    replica_of[r] = grid_.coord_of(r).dp;
  }
  return pipeline::summarise(per_rank, stage_of, replica_of, grid_.pp_size(), grid_.dp_size());
}

void BalanceMonitor::record(int64_t completed, const pipeline::BalanceFigures& f, metrics::MetricsFile* metrics) const {
  const bool imbalanced = f.stage_ratio() > settings_.threshold || f.replica_ratio() > settings_.threshold;
  if (imbalanced) {
    char threshold[48];
    std::snprintf(threshold, sizeof threshold, ", above balance.threshold %g", settings_.threshold);
    print0("balance: after step " + std::to_string(completed) + ": " + describe(f) + threshold);
  }
  if (!metrics) return;
  metrics->append_int("balance/step", completed);
  for (size_t s = 0; s < f.stage_forward_ms.size(); ++s) {
    const std::string stage = "balance/stage" + std::to_string(s);
    metrics->append(stage + "/forward_ms", f.stage_forward_ms[s]);
    metrics->append(stage + "/backward_ms", f.stage_backward_ms[s]);
    metrics->append(stage + "/edge_ms", f.stage_edge_ms[s]);
  }
  for (size_t d = 0; d < f.replica_forward_ms.size(); ++d) {
    const std::string replica = "balance/replica" + std::to_string(d);
    metrics->append(replica + "/forward_ms", f.replica_forward_ms[d]);
    metrics->append(replica + "/backward_ms", f.replica_backward_ms[d]);
  }
  metrics->append("balance/stage_ratio", f.stage_ratio());
  metrics->append("balance/replica_ratio", f.replica_ratio());
  metrics->append_int("balance/imbalanced", imbalanced ? 1 : 0);
}

std::string BalanceMonitor::describe(const pipeline::BalanceFigures& f) {
  char ratios[64];
  std::snprintf(ratios, sizeof ratios, " ms (max/min %.2f)", f.stage_ratio());
  std::string text = "forward+backward per micro-batch: stages " + list_ms(f.stage_forward_ms, f.stage_backward_ms) + ratios;
  std::snprintf(ratios, sizeof ratios, " ms (max/min %.2f)", f.replica_ratio());
  return text + "; replicas " + list_ms(f.replica_forward_ms, f.replica_backward_ms) + ratios;
}

}  // namespace trident
