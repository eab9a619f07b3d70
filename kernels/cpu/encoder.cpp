// Token + position embedding, forward and backward.
#include "kernels/kernels.hpp"

namespace trident::kernels {

void encoder_forward(Context&, float* out, const int32_t* tokens, const float* wte,
                     const float* wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* y = out + (static_cast<size_t>(b) * T + t) * C;
      const float* token_row = wte + static_cast<size_t>(tokens[b * T + t]) * C;
      const float* position_row = wpe + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) y[c] = token_row[c] + position_row[c];
    }
}

void encoder_backward(Context&, float* dwte, float* dwpe, const float* dout,
                      const int32_t* tokens, int B, int T, int C) {
  // Several positions may carry the same token: split the work over channels, not positions,
  // so that each gradient entry is summed by one thread in position order.
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c)
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const float g = dout[(static_cast<size_t>(b) * T + t) * C + c];
        dwte[static_cast<size_t>(tokens[b * T + t]) * C + c] += g;
        dwpe[static_cast<size_t>(t) * C + c] += g;
      }
}

}  // namespace trident::kernels
