// Layout search: every runnable (tensor, pipeline, data, micro-batch, recompute, ZeRO) for a
// device count, each estimated by the step model, ranked by predicted tokens/s; and the seed's
// planning rule (§2.1) N = T_comp / (T_comm × α) beside the model's own scaling curve.
#pragma once

#include <string>
#include <vector>

#include "plan/step_model.hpp"

namespace trident::plan {

struct Candidate {
  Layout layout;
  StepEstimate estimate;
};

struct SearchSpace {
  std::vector<std::string> recompute = {"none", "selective", "full"};
  // Pipeline schedules tried with pipeline > 1 (ZB-H1 not with full recompute); also the base's.
  std::vector<pipeline::Schedule> schedules = {pipeline::Schedule::OneFOneB, pipeline::Schedule::ZeroBubbleH1};
  // Model chunks per stage tried with 1F1B (interleaved where > 1 and the layout allows it).
  std::vector<int> virtual_stages = {1, 2, 3, 4};
  bool sequence_parallel = true;  // try sequence parallelism beside none where tensor > 1
  bool tp_comm_overlap = true;    // try the overlap beside none where sequence parallelism is tried
  int max_context = 8;            // context degrees tried: 1, and those up to this that divide the rest
  // ZeRO stages tried where the gradient group has more than one rank (0 always).
  std::vector<int> zero_stages = {0, 1, 2, 3};
  int max_micro_batch = 16;
};

// Every layout of `devices` devices that passes layout_problem, the rest of `base` (precision,
// links, buckets) kept; with one stage, the base's schedule only. Feasible ones first by tokens/s (highest first), then the
// infeasible by their memory (least first).
std::vector<Candidate> search_layouts(const Workload& w, const Layout& base, int devices, const Hardware& hw,
                                      const SearchSpace& space = {});

// The first feasible candidate, or null.
const Candidate* best_feasible(const std::vector<Candidate>& ranked);

// The seed's §2.1 rule for one dimension of an estimated layout.
struct SeedRule {
  std::string dimension;    // "tensor", "pipeline", "data"
  double t_comp_s = 0;      // one step's compute on one device (all FLOPs at the achieved rate)
  double t_comm_s = 0;      // that dimension's communication per step in the layout (pipeline: with the bubble)
  double alpha_lo = 0, alpha_hi = 0;  // the seed's range of α
  double n_lo = 0, n_hi = 0;          // N = T_comp / (T_comm × α) at α_hi and α_lo
};
std::vector<SeedRule> seed_rules(const Workload& w, const Candidate& c, const Hardware& hw);

// One point of the scaling curve: the best layout for a device count, and its efficiency
// against perfect scaling of the smallest count that fits.
struct CurvePoint {
  int devices = 0;
  const Candidate* best = nullptr;  // null: nothing fits
  std::vector<Candidate> ranked;
  double efficiency = 0;
  bool negative = false;  // predicted slower than a smaller count
};
std::vector<CurvePoint> scaling_curve(const Workload& w, const Layout& base, const std::vector<int>& counts,
                                      const Hardware& hw, const SearchSpace& space = {});

}  // namespace trident::plan
