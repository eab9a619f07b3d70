// The model's GEMM shapes and their timed pass.
#include "train/gemm_probe.hpp"

#include <algorithm>
#include <chrono>

#include "core/clock.hpp"

namespace trident {

using Clock = std::chrono::steady_clock;

std::vector<GemmShape> model_gemms(const model::GptConfig& c, int B, int T) {
  std::vector<GemmShape> shapes;
  const int C = c.channels, BT = B * T, heads = B * c.heads, hs = c.channels / c.heads;
  for (int l = 0; l < c.layers; ++l) {
    shapes.push_back({heads, T, T, hs, false, true, false});   // S = q kᵀ
    shapes.push_back({heads, T, hs, T, false, false, false});  // y = P v
    shapes.push_back({heads, T, T, hs, false, true, false});   // dP = dy vᵀ
    shapes.push_back({heads, T, hs, T, true, false, false});   // dv = Pᵀ dy
    shapes.push_back({heads, T, hs, T, false, false, false});  // dq = dS k
    shapes.push_back({heads, T, hs, T, true, false, false});   // dk = dSᵀ q
  }
  const std::pair<int, int> linears[] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, c.padded_vocab}};
  for (const auto& [K, N] : linears) {
    const int repeat = N == c.padded_vocab ? 1 : c.layers;
    for (int r = 0; r < repeat; ++r) {
      shapes.push_back({1, BT, N, K, false, true, false});  // y = x wᵀ
      shapes.push_back({1, BT, K, N, false, false, false});  // dx = dy w
      shapes.push_back({1, N, K, BT, true, false, true});    // dw += dyᵀ x
    }
  }
  return shapes;
}

GemmPass::GemmPass(const model::GptConfig& config, int B, int T, bool bf16)
    : shapes_(model_gemms(config, B, T)), bf16_(bf16) {
  size_t largest = 0;
  for (const auto& s : shapes_) {
    largest = std::max({largest, size_t(s.batch) * s.M * s.K, size_t(s.batch) * s.K * s.N,
                        size_t(s.batch) * s.M * s.N});
    flops_ += 2.0 * s.batch * s.M * s.N * s.K;
  }
  a_.assign(largest, 0.01f), b_.assign(largest, 0.02f), c_.assign(largest, 0.0f);
  if (bf16_) {
    a16_.resize(largest), b16_.resize(largest);
    kernels::to_bf16(ctx_, a16_.data(), a_.data(), largest);
    kernels::to_bf16(ctx_, b16_.data(), b_.data(), largest);
  }
}

double GemmPass::run() {
  const auto start = Clock::now();
  for (const auto& s : shapes_) {
    if (bf16_)
      kernels::batched_matmul_bf16(ctx_, c_.data(), a16_.data(), b16_.data(), s.batch, s.M, s.N, s.K, s.ta, s.tb,
                                   s.accumulate);
    else
      kernels::batched_matmul(ctx_, c_.data(), a_.data(), b_.data(), s.batch, s.M, s.N, s.K, s.ta, s.tb,
                              s.accumulate);
  }
  return seconds_since(start);
}

}  // namespace trident
