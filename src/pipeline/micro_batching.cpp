// The micro-batch count rules: the seed's §4.1 and the fitted step model.
#include "pipeline/micro_batching.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/clock.hpp"

namespace trident::pipeline {

std::vector<int> micro_batch_counts(int64_t sequences) {
  std::vector<int> counts;
  for (int64_t m = 1; m <= sequences; ++m)
    if (sequences % m == 0) counts.push_back(static_cast<int>(m));
  return counts;
}

namespace {

// max / median of the stages' forward + backward per micro-batch (0 when there is nothing to
// divide: no stages, or a median of 0).
double max_over_median(const BalanceFigures& f) {
  std::vector<double> times;
  for (size_t s = 0; s < f.stage_forward_ms.size(); ++s) times.push_back(f.stage_ms(static_cast<int>(s)));
  const double middle = median(times);
  if (times.empty() || middle <= 0) return 0;
  return *std::max_element(times.begin(), times.end()) / middle;
}

// "4 x 2": m micro-batches of S/m sequences.
std::string count_text(int m, int64_t sequences) {
  return std::to_string(m) + " x " + std::to_string(sequences / m);
}

}  // namespace

int seed_micro_batches(const BalanceFigures& f) {
  return std::max(1, static_cast<int>(std::ceil(max_over_median(f))));
}

void MicroBatchCost::fit(double* alpha, double* beta) const {
  double n = 0, mean_b = 0, mean_t = 0;
  for (const auto& [b, t] : points_) n += 1, mean_b += b, mean_t += t;
  *alpha = *beta = 0;
  if (n == 0) return;
  mean_b /= n, mean_t /= n;
  double sbt = 0, sbb = 0, through_origin_bt = 0, through_origin_bb = 0;
  for (const auto& [b, t] : points_) {
    sbt += (b - mean_b) * (t - mean_t), sbb += (b - mean_b) * (b - mean_b);
    through_origin_bt += b * t, through_origin_bb += double(b) * b;
  }
  *beta = sbb > 0 ? sbt / sbb : 0;
  *alpha = mean_t - *beta * mean_b;
  if (*beta < 0) *beta = 0, *alpha = mean_t;                                      // all fixed cost
  if (*alpha < 0) *alpha = 0, *beta = through_origin_bt / through_origin_bb;      // all per sequence
}

double MicroBatchCost::alpha() const {
  double a, b;
  fit(&a, &b);
  return a;
}

double MicroBatchCost::beta() const {
  double a, b;
  fit(&a, &b);
  return b;
}

double predicted_pipeline_ms(const MicroBatchCost& cost, int count, int stages, int64_t sequences, int chunks) {
  const int micro_batch = static_cast<int>(sequences / count);
  return (count + double(stages - 1) / chunks) * cost.per_micro_batch_ms(micro_batch);
}

int probe_count(int current, int stages, const std::vector<int>& allowed) {
  int below = 0, above = 0;  // the nearest allowed counts on either side
  for (int m : allowed) {
    if (m < current) below = m;
    if (m > current && above == 0) above = m;
  }
  const bool more_first = stages > 1;
  if (more_first) return above ? above : below;
  return below ? below : above;
}

Decision decide_seed_count(const BalanceFigures& f, int current, const std::vector<int>& allowed, double threshold) {
  Decision d;
  d.counts = {current};
  const int wanted = seed_micro_batches(f);
  int chosen = allowed.empty() ? current : allowed.back();
  for (int m : allowed)
    if (m >= wanted) {
      chosen = m;
      break;
    }
  char text[240];
  std::snprintf(text, sizeof text, "micro-batches (seed 4.1): max/median %.3f -> N = %d", max_over_median(f), wanted);
  d.why = text;
  if (chosen != wanted) d.why += " (the nearest count that divides the batch and fits: " + std::to_string(chosen) + ")";
  d.why += "; " + std::to_string(current) + " -> " + std::to_string(chosen);
  if (f.stage_ratio() <= threshold) {
    std::snprintf(text, sizeof text, "; max/min %.2f within threshold %g: no change", f.stage_ratio(), threshold);
  } else if (chosen == current) {
    std::snprintf(text, sizeof text, ": no change");
  } else {
    std::snprintf(text, sizeof text, " (max/min %.2f above threshold %g)", f.stage_ratio(), threshold);
    d.counts = {chosen};
    d.move = true;
  }
  d.why += text;
  return d;
}

Decision decide_model_count(const MicroBatchCost& cost, int current, int stages, int64_t sequences,
                            const std::vector<int>& allowed, double margin, int chunks) {
  Decision d;
  d.counts = {current};
  d.current_ms = predicted_pipeline_ms(cost, current, stages, sequences, chunks);
  // Within one size of what was measured: a line through sizes 4 and 8 says little about size
  // 1, where the costs of every operation that do not shrink with it weigh most (a bench row
  // here went from 2 x 8 to 16 x 1 on such a line and lost 7%). Further sizes come one move at
  // a time, each measured before the next.
  const int smallest = cost.points().begin()->first, largest = cost.points().rbegin()->first;
  int below = 0, above = 0;  // the nearest allowed micro-batch sizes beyond the measured ones (0: none)
  for (int m : allowed) {
    const int size = static_cast<int>(sequences / m);
    if (size < smallest) below = std::max(below, size);
    if (size > largest && (above == 0 || size < above)) above = size;
  }
  const int low = below ? below : smallest, high = above ? above : largest;
  int best = current;
  double best_ms = d.current_ms;
  for (int m : allowed) {
    const int size = static_cast<int>(sequences / m);
    if (size < low || size > high) continue;
    const double ms = predicted_pipeline_ms(cost, m, stages, sequences, chunks);
    if (ms < best_ms) best = m, best_ms = ms;
  }
  d.predicted_ms = best_ms;
  char text[320];
  std::snprintf(text, sizeof text,
                "micro-batches (model): t(b) = %.3f + %.3f b ms from %zu sizes; %s -> %s, the pipeline's part of "
                "the step %.2f -> %.2f ms predicted (bubble %.0f%% -> %.0f%%, gain %.1f%%",
                cost.alpha(), cost.beta(), cost.points().size(), count_text(current, sequences).c_str(),
                count_text(best, sequences).c_str(), d.current_ms, best_ms,
                100.0 * (stages - 1) / (chunks * current + stages - 1), 100.0 * (stages - 1) / (chunks * best + stages - 1),
                100.0 * d.gain());
  d.why = text;
  if (best == current || d.gain() <= margin) {
    std::snprintf(text, sizeof text, ", not above margin %.1f%%): no change", 100.0 * margin);
  } else {
    std::snprintf(text, sizeof text, " > margin %.1f%%)", 100.0 * margin);
    d.counts = {best};
    d.move = true;
  }
  d.why += text;
  return d;
}

}  // namespace trident::pipeline
