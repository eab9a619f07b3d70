// The CUDA backend's operations on tensors that unwrap into its kernels on pointers:
// kernels/common/unwrap.inc.
#include "kernels/common/extents.hpp"
#include "kernels/cuda/cuda.hpp"

namespace trident::kernels::cuda {

#include "kernels/common/unwrap.inc"

}  // namespace trident::kernels::cuda
