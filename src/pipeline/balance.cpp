// Balance figures and the min-max allocation of blocks to stages and micro-batches to replicas.
#include "pipeline/balance.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "pipeline/schedule.hpp"

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
                                   int total, const std::vector<int>& current, int least) {
  const int workers = static_cast<int>(unit_ms.size());
  if (workers == 0 || least < 1 || total < workers * least || fixed_ms.size() != unit_ms.size())
    throw std::invalid_argument("minmax_allocation: every worker needs its least units and a cost");
  std::vector<int> counts(workers, least);
  for (int given = workers * least; given < total; ++given) {
    int best = 0;
    for (int w = 1; w < workers; ++w)
      if (fixed_ms[w] + (counts[w] + 1) * unit_ms[w] < fixed_ms[best] + (counts[best] + 1) * unit_ms[best]) best = w;
    ++counts[best];
  }
  if (current.empty()) return counts;
  // The greedy fixes the slowest worker's time; any allocation whose workers all stay within it
  // is as good. Of those, the one nearest `current`: each worker keeps what it has up to its
  // cap, and what is missing goes where it ends lowest — the fewest units moved.
  const double best = predicted_max_ms(unit_ms, fixed_ms, counts);
  std::vector<int> cap(counts), near(workers);  // cap: the most units a worker takes within `best`
  int placed = 0;
  for (int w = 0; w < workers; ++w) {
    while (cap[w] < total && fixed_ms[w] + (cap[w] + 1) * unit_ms[w] <= best) ++cap[w];
    near[w] = std::max(least, std::min(current[w], cap[w]));
    placed += near[w];
  }
  for (; placed < total; ++placed) {
    int to = -1;
    for (int w = 0; w < workers; ++w)
      if (near[w] < cap[w] && (to < 0 || fixed_ms[w] + (near[w] + 1) * unit_ms[w] < fixed_ms[to] + (near[to] + 1) * unit_ms[to]))
        to = w;
    if (to < 0) return counts;  // rounding left no room: the greedy's answer
    ++near[to];
  }
  return placed == total ? near : counts;
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

namespace {

Decision decide(const std::vector<double>& unit, const std::vector<double>& fixed, const std::vector<int>& current,
                double ratio, double threshold, double margin, const std::string& what, int least = 1) {
  Decision d;
  int total = 0;
  for (int n : current) total += n;
  d.counts = minmax_allocation(unit, fixed, total, current, least);
  d.current_ms = predicted_max_ms(unit, fixed, current);
  d.predicted_ms = predicted_max_ms(unit, fixed, d.counts);
  char text[240];
  std::snprintf(text, sizeof text, "%s %s -> %s, slowest %.3f -> %.3f ms predicted (gain %.1f%%", what.c_str(),
                split_text(current).c_str(), split_text(d.counts).c_str(), d.current_ms, d.predicted_ms,
                100.0 * d.gain());
  d.why = text;
  if (ratio <= threshold) {
    std::snprintf(text, sizeof text, "); max/min %.2f within threshold %g: no move", ratio, threshold);
  } else if (d.counts == current || d.gain() <= margin) {
    std::snprintf(text, sizeof text, ", not above margin %.1f%%): no move", 100.0 * margin);
  } else {
    std::snprintf(text, sizeof text, " > margin %.1f%%)", 100.0 * margin);
    d.move = true;
  }
  d.why += text;
  return d;
}

}  // namespace

Decision decide_split(const BalanceFigures& figures, const std::vector<int>& current, int stages, double threshold,
                      double margin) {
  const int chunks = static_cast<int>(current.size()) / stages;
  const std::vector<int> totals = stage_totals(current, stages);
  std::vector<double> unit, fixed;
  stage_costs(figures, totals, &unit, &fixed);
  Decision d = decide(unit, fixed, totals, figures.stage_ratio(), threshold, margin, "stages", chunks);  // a block a chunk
  if (chunks == 1) return d;
  d.counts = spread_over_chunks(current, d.counts, stages);
  d.why = "chunks " + split_text(current) + " -> " + split_text(d.counts) + ", " + d.why;
  return d;
}

std::vector<int> spread_over_chunks(const std::vector<int>& current, const std::vector<int>& stage_totals, int stages) {
  std::vector<int> counts(current);
  const int virtual_stages = static_cast<int>(current.size());
  for (int s = 0; s < stages; ++s) {
    int have = 0;
    for (int u = s; u < virtual_stages; u += stages) have += counts[u];
    for (; have < stage_totals[s]; ++have) {
      int to = s;
      for (int u = s; u < virtual_stages; u += stages)
        if (counts[u] < counts[to]) to = u;
      ++counts[to];
    }
    for (; have > stage_totals[s]; --have) {
      int from = s;
      for (int u = s; u < virtual_stages; u += stages)
        if (counts[u] >= counts[from]) from = u;
      if (counts[from] <= 1) throw std::invalid_argument("spread_over_chunks: fewer blocks than chunks");
      --counts[from];
    }
  }
  return counts;
}

Decision decide_shares(const BalanceFigures& figures, const std::vector<int>& current, double threshold, double margin,
                       int group) {
  std::vector<double> unit(current.size()), fixed(current.size(), 0.0);
  std::vector<int> groups(current.size());
  for (size_t d = 0; d < current.size(); ++d)
    unit[d] = group * figures.replica_ms(static_cast<int>(d)), groups[d] = current[d] / group;
  Decision d = decide(unit, fixed, groups, figures.replica_ratio(), threshold, margin,
                      group > 1 ? "replica shares in groups of " + std::to_string(group) + ":" : "replica shares");
  for (int& n : d.counts) n *= group;
  return d;
}

void Hysteresis::apply(Decision& decision, int64_t completed, int64_t cooldown) {
  // Confirmed: the previous measurement proposed a move too (not necessarily the same one: the
  // imbalance lasted, and the newer figures choose where to).
  const bool confirmed = !proposed.empty();
  proposed = decision.move ? decision.counts : std::vector<int>{};
  if (!decision.move) return;
  if (last_move >= 0 && completed - last_move < cooldown) {
    decision.move = false;
    decision.why += ": held, within balance.cooldown = " + std::to_string(cooldown) + " steps of the move after step " +
                    std::to_string(last_move);
  } else if (!confirmed) {
    decision.move = false;
    decision.why += ": proposed, moving if the next measurement agrees";
  } else {
    decision.why += ": confirmed, moving";
    last_move = completed;
    proposed.clear();
  }
}

std::string split_text(const std::vector<int>& counts) {
  std::string text;
  for (int n : counts) text += (text.empty() ? "" : ",") + std::to_string(n);
  return text;
}

}  // namespace trident::pipeline
