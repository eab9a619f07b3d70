// The CPU's operations on tensors that unwrap into its kernels on pointers: kernels/common/unwrap.inc.
#include "kernels/common/extents.hpp"
#include "kernels/cpu/cpu.hpp"

namespace trident::kernels::cpu {

#include "kernels/common/unwrap.inc"

}  // namespace trident::kernels::cpu
