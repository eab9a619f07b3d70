// The time of one GEMM by its shape (docs/PLANNER.md, "GEMM time by shape"), instead of one
// achieved fraction for every product: a large square GEMM and an attention head's product with
// K = 64 do not run at the same fraction of the peak. Where the profile holds measured rates
// ([gemm]: `trident plan --calibrate` on this host, scripts/gpu-check.sh on a GPU), the model is
// anchored at the nearest; its shape model is
//
//   t(batch, M, N, K) = max( 2·batch·M·N·K / (peak · gemm_fraction · waves(M, N, batch)),
//                            element bytes · batch · (M·K + K·N + M·N) / memory bandwidth )
//
// - gemm_fraction: what the largest GEMMs of a training step achieve (the profile's figure);
// - waves: the library tiles the output in 256 × 128 blocks, one per compute unit (SM) at a
//   time; the last wave runs with units idle — the tile and wave quantization of NVIDIA's
//   "Matrix Multiplication Background" guide. A profile without compute_units has none (a CPU);
// - the roofline: a product whose operands and result take longer to move than to multiply
//   is memory-bound (the guide's arithmetic intensity against the device's FLOP:byte ratio).
// A profile without compute_units — a CPU's, whose rate `trident plan --calibrate` measured on
// the model's own GEMMs, shapes and all — takes every product at that rate.
#pragma once

#include <string>
#include <vector>

#include "plan/hardware.hpp"

namespace trident::plan {

// c[b] (M, N) = a[b] (M, K) · b[b] (K, N) for b < batch.
struct GemmShape {
  double batch = 1, M = 0, N = 0, K = 0;
  double flops() const { return 2 * batch * M * N * K; }
};

// The fraction of the compute units' time the last wave leaves busy (1: whole waves, or no
// compute_units in the profile).
double wave_efficiency(const GemmShape& g, const Hardware& hw);

// Seconds of one GEMM in `precision` (its element size moves through memory) by the shape model.
double shape_model_seconds(const GemmShape& g, const std::string& precision, const Hardware& hw);

// The profile's measured rate in `precision` nearest to g — the least Σ ln²(g_i / p_i) over
// batch, M, N and K — or null where its [gemm] section has none.
const GemmPoint* nearest_measured(const GemmShape& g, const std::string& precision, const Hardware& hw);

// Seconds of one GEMM: the shape model anchored at the nearest measured shape p,
// t(g) = model(g) · measured(p) / model(p) — the measured time at a measured shape, the model's
// ratio between shapes elsewhere; the shape model alone where nothing is measured.
double gemm_seconds(const GemmShape& g, const std::string& precision, const Hardware& hw);

// The three products of a weight GEMM y (M, N) = x (M, K) · w (K, N) in training: forward,
// the input gradient dx (M, K) = dy · wᵀ and the weight gradient dw (K, N) = xᵀ · dy.
std::vector<GemmShape> with_gradients(const GemmShape& forward);

}  // namespace trident::plan
