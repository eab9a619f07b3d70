// Layout search, the seed's planning rule and the scaling curve.
#include "plan/search.hpp"

#include <algorithm>

namespace trident::plan {
namespace {

std::vector<int> divisors(int64_t n, int64_t at_most) {
  std::vector<int> out;
  for (int64_t d = 1; d <= std::min(n, at_most); ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

bool better(const Candidate& a, const Candidate& b) {
  if (a.estimate.feasible != b.estimate.feasible) return a.estimate.feasible;
  if (a.estimate.feasible) return a.estimate.tokens_per_s > b.estimate.tokens_per_s;
  return a.estimate.memory_total < b.estimate.memory_total;
}

// The base's schedule, and with more than one stage the space's others that the recompute mode
// allows (ZB-H1 keeps every block's GEMM inputs: not with full or every-K recompute).
std::vector<pipeline::Schedule> schedules_for(int stages, const std::string& recompute, const Layout& base,
                                              const SearchSpace& space) {
  std::vector<pipeline::Schedule> out{base.schedule};
  if (stages == 1) return out;
  for (pipeline::Schedule s : space.schedules) {
    const bool allowed = !pipeline::splits_backward(s) || recompute == "none" || recompute == "selective";
    if (allowed && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  if (pipeline::splits_backward(base.schedule) && recompute != "none" && recompute != "selective") out.erase(out.begin());
  return out;
}

// Interleaving applies to 1F1B with a pipeline: the space's counts (and the base's); else one.
std::vector<int> chunk_counts(int stages, pipeline::Schedule schedule, const Layout& base, const SearchSpace& space) {
  if (stages == 1 || schedule != pipeline::Schedule::OneFOneB) return {1};
  std::vector<int> out = space.virtual_stages;
  if (std::find(out.begin(), out.end(), base.virtual_stages) == out.end()) out.push_back(base.virtual_stages);
  return out;
}

// Sequence parallelism splits nothing with one tensor rank: off there; else the base's, and
// the other where the space tries both.
std::vector<bool> sequence_choices(int tensor, const Layout& base, const SearchSpace& space) {
  if (tensor == 1) return {false};
  if (!space.sequence_parallel) return {base.sequence_parallel};
  return {base.sequence_parallel, !base.sequence_parallel};
}

}  // namespace

std::vector<Candidate> search_layouts(const Workload& w, const Layout& base, int devices, const Hardware& hw,
                                      const SearchSpace& space) {
  std::vector<Candidate> out;
  EstimateCache cache;  // the workload's and base's model and bucket size throughout
  for (int t : divisors(devices, w.config.heads))
    for (int p : divisors(devices / t, w.config.layers))
      for (int c : divisors(devices / t / p, w.flash_attention ? space.max_context : 1)) {
        const int d = devices / t / p / c;
        if (w.global_batch % d || (c > 1 && w.seq_len % (2 * c) != 0)) continue;
        for (int b : divisors(w.global_batch / d, space.max_micro_batch))
          for (const std::string& recompute : space.recompute)
            for (pipeline::Schedule schedule : schedules_for(p, recompute, base, space))
              for (int v : chunk_counts(p, schedule, base, space))
                for (bool sp : sequence_choices(t, base, space))
                  for (bool overlap : {false, true})
                    for (int zero : space.zero_stages) {
                      if (overlap && !(sp && space.tp_comm_overlap)) continue;
                      if (zero && d * c == 1) continue;
                      Layout l = base;
                      l.tensor = t, l.pipeline = p, l.data = d, l.context = c, l.micro_batch = b, l.recompute = recompute;
                      l.zero = zero;
                      l.schedule = schedule, l.virtual_stages = v, l.sequence_parallel = sp, l.tp_comm_overlap = overlap;
                      l.stage_layers.clear();
                      if (!layout_problem(w, l).empty()) continue;
                      out.push_back({l, estimate_step(w, l, hw, &cache)});
                    }
      }
  std::stable_sort(out.begin(), out.end(), better);
  return out;
}

const Candidate* best_feasible(const std::vector<Candidate>& ranked) {
  return !ranked.empty() && ranked.front().estimate.feasible ? &ranked.front() : nullptr;
}

std::vector<SeedRule> seed_rules(const Workload& w, const Candidate& c, const Hardware& hw) {
  const StepEstimate& e = c.estimate;
  const double t_comp = e.hardware_flops / (hw.peak(c.layout.precision) * hw.gemm_fraction);
  double tensor = 0;
  for (const StageTime& s : e.stages) tensor = std::max(tensor, s.tensor_s);
  double p2p = 0;
  for (const StageTime& s : e.stages) p2p = std::max(p2p, s.p2p_s);
  const double m = e.micro_batches;
  const SeedRule rules[] = {
      {"tensor", t_comp, tensor * m, 0.6, 0.8},
      {"pipeline", t_comp, p2p * m + e.bubble_s, 0.4, 0.6},
      {"data", t_comp, e.data_s, 0.8, 0.95},
  };
  std::vector<SeedRule> out;
  for (SeedRule r : rules) {
    r.n_lo = r.t_comm_s > 0 ? r.t_comp_s / (r.t_comm_s * r.alpha_hi) : 0;
    r.n_hi = r.t_comm_s > 0 ? r.t_comp_s / (r.t_comm_s * r.alpha_lo) : 0;
    out.push_back(r);
  }
  return out;
}

std::vector<CurvePoint> scaling_curve(const Workload& w, const Layout& base, const std::vector<int>& counts,
                                      const Hardware& hw, const SearchSpace& space) {
  std::vector<CurvePoint> curve;
  curve.reserve(counts.size());  // `best` points into each point's own ranking
  double reference = 0, best_so_far = 0;  // tokens/s per device of the smallest count that fits
  for (int n : counts) {
    CurvePoint point;
    point.devices = n;
    point.ranked = search_layouts(w, base, n, hw, space);
    curve.push_back(std::move(point));
    CurvePoint& p = curve.back();
    p.best = best_feasible(p.ranked);
    if (!p.best) continue;
    const double rate = p.best->estimate.tokens_per_s;
    if (reference == 0) reference = rate / n;
    p.efficiency = rate / (reference * n);
    p.negative = rate < best_so_far;
    best_so_far = std::max(best_so_far, rate);
  }
  return curve;
}

}  // namespace trident::plan
