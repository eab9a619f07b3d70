// GEMM time by shape: waves of output tiles over the compute units, and the roofline.
#include "plan/gemm_model.hpp"

#include <algorithm>
#include <cmath>

namespace trident::plan {
namespace {

// cuBLAS's largest CTA tile on Ampere and Hopper for 16-bit operands, the one NVIDIA's guide
// uses for its quantization examples: the tile count of a large product.
constexpr double kTileM = 256, kTileN = 128;

double element_bytes(const std::string& precision) { return precision == "fp32" ? 4 : 2; }

}  // namespace

double wave_efficiency(const GemmShape& g, const Hardware& hw) {
  if (hw.compute_units <= 0) return 1;
  const double tiles = g.batch * std::ceil(g.M / kTileM) * std::ceil(g.N / kTileN);
  const double waves = std::ceil(tiles / hw.compute_units);
  // Partly filled tiles count as whole ones: their units are busy for a whole tile's time.
  const double useful = g.batch * g.M * g.N / (kTileM * kTileN);
  return std::min(1.0, useful / (waves * hw.compute_units));
}

double shape_model_seconds(const GemmShape& g, const std::string& precision, const Hardware& hw) {
  if (g.flops() <= 0) return 0;
  const double compute = g.flops() / (hw.peak(precision) * hw.gemm_fraction * wave_efficiency(g, hw));
  if (hw.compute_units <= 0) return compute;  // a rate measured on the model's own products: shapes included
  const double bytes = element_bytes(precision) * g.batch * (g.M * g.K + g.K * g.N + g.M * g.N);
  return std::max(compute, bytes / hw.memory_bandwidth);
}

std::vector<GemmShape> with_gradients(const GemmShape& f) {
  return {f, {f.batch, f.M, f.K, f.N}, {f.batch, f.K, f.N, f.M}};
}

const GemmPoint* nearest_measured(const GemmShape& g, const std::string& precision, const Hardware& hw) {
  const GemmPoint* best = nullptr;
  double best_distance = 0;
  for (const GemmPoint& p : hw.gemm_table) {
    if (p.precision != precision) continue;
    const double distance = std::pow(std::log(g.batch / p.batch), 2) + std::pow(std::log(g.M / p.M), 2) +
                            std::pow(std::log(g.N / p.N), 2) + std::pow(std::log(g.K / p.K), 2);
    if (!best || distance < best_distance) best = &p, best_distance = distance;
  }
  return best;
}

double gemm_seconds(const GemmShape& g, const std::string& precision, const Hardware& hw) {
  if (g.flops() <= 0) return 0;
  const GemmPoint* p = nearest_measured(g, precision, hw);
  if (!p) return shape_model_seconds(g, precision, hw);
  const GemmShape anchor{p->batch, p->M, p->N, p->K};
  return shape_model_seconds(g, precision, hw) * (anchor.flops() / p->flops_per_s) /
         shape_model_seconds(anchor, precision, hw);
}

}  // namespace trident::plan
