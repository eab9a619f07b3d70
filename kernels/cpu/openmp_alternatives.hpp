// Our own OpenMP versions of kernels for which oneDNN's primitives turned out faster: kept to
// measure against (`trident bench --kernels`) and tested like the rest.
#pragma once

#include <cstddef>

namespace trident::kernels::openmp {

// As kernels::layernorm_forward/backward, but saving rstd = 1/√(var + 1e-5) instead of var.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C);
void gelu_forward(float* out, const float* inp, size_t n);

}  // namespace trident::kernels::openmp
