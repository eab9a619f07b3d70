// What `trident plan` prints: the ranked table, one JSON object per layout, the seed's rule
// beside the model, the scaling curve, and the audit of a throughput claim. Pure formatting
// of the step model's figures.
#pragma once

#include <string>
#include <vector>

#include "plan/search.hpp"

namespace trident::plan {

// Throughput of `l` against `l.data` independent replicas each running its share of the batch
// alone (data = 1): 1 when the data-parallel reduction costs nothing.
double scaling_efficiency(const Workload& w, const Layout& l, const Hardware& hw);

// One line of JSON: the layout, feasibility and reason, memory bytes per category, the times,
// tokens/s, TFLOP/s per device, MFU, the scaling efficiency; `source` is "deck" or "search".
std::string layout_json(const Candidate& c, double efficiency, const std::string& source, int rank);

std::string table_header();
std::string table_row(const Candidate& c, int rank);
// The breakdown of one estimate: per-stage times, bubble, reduction, bytes per level.
std::string breakdown(const Candidate& c);

std::string seed_rule_table(const std::vector<SeedRule>& rules, int model_best_devices);
std::string curve_table(const std::vector<CurvePoint>& curve);

// The audit of a claimed samples/s on `devices` devices: the FLOP/s it implies against the
// devices' peak, the longest sequence at which it would still be under the peak, the model's
// best layout, and whether `claimed` (the deck's layout) fits, with the arithmetic.
std::string audit(const Workload& w, const Hardware& hw, double samples_per_s, int devices,
                  const Candidate& claimed, const Candidate* best);

}  // namespace trident::plan
