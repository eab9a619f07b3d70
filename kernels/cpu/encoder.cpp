// Token and position embeddings, forward and backward.
#include "kernels/common/low16.hpp"
#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {

namespace {

// out (B·T, C) = the widened wte rows of the tokens in the slice, 0 for the others.
template <class Element, class Widen>
void gather_rows(float* out, const int32_t* tokens, const Element* wte, int vocab_begin, int rows, int B, int T,
                 int C, Widen widen) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < B * T; ++n) {
    float* y = out + static_cast<size_t>(n) * C;
    const int row = tokens[n] - vocab_begin;
    if (row < 0 || row >= rows) {
      for (int c = 0; c < C; ++c) y[c] = 0.0f;
      continue;
    }
    const Element* token_row = wte + static_cast<size_t>(row) * C;
    for (int c = 0; c < C; ++c) y[c] = widen(token_row[c]);
  }
}

}  // namespace

void embedding_forward(Context&, float* out, const int32_t* tokens, const float* wte, int vocab_begin, int rows,
                       int B, int T, int C) {
  gather_rows(out, tokens, wte, vocab_begin, rows, B, T, C, [](float x) { return x; });
}

void embedding_forward_low16(Context&, Precision precision, float* out, const int32_t* tokens, const low16* wte,
                             int vocab_begin, int rows, int B, int T, int C) {
  if (precision == Precision::fp16)
    gather_rows(out, tokens, wte, vocab_begin, rows, B, T, C, [](low16 x) { return low16_widen<true>(x); });
  else
    gather_rows(out, tokens, wte, vocab_begin, rows, B, T, C, [](low16 x) { return low16_widen<false>(x); });
}

void positions_forward(Context&, float* out, const float* wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* y = out + (static_cast<size_t>(b) * T + t) * C;
      const float* position_row = wpe + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) y[c] += position_row[c];
    }
}

void embedding_backward(Context&, float* dwte, const float* dout, const int32_t* tokens,
                        int vocab_begin, int rows, int B, int T, int C) {
  // Several positions may carry the same token: split the work over channels, not positions,
  // so that each gradient entry is summed by one thread in position order.
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c)
    for (int n = 0; n < B * T; ++n) {
      const int row = tokens[n] - vocab_begin;
      if (row >= 0 && row < rows) dwte[static_cast<size_t>(row) * C + c] += dout[static_cast<size_t>(n) * C + c];
    }
}

void positions_backward(Context&, float* dwpe, const float* dout, int B, int T, int C) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      const float* g = dout + (static_cast<size_t>(b) * T + t) * C;
      float* d = dwpe + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) d[c] += g[c];
    }
}

}  // namespace trident::kernels::cpu
