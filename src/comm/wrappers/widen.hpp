// 16-bit values (bf16, fp16) in the collectives: widened to f32 to be added, and rounded back to
// nearest even — the rounding of the kernels' 16-bit storage (tensor/low16.hpp). The MPI
// ring's 16-bit reduce-scatter rounds what each hop sends on (comm/mpi/mpi_communicator.hpp).
#pragma once

#include <cstddef>

#include "tensor/device.hpp"

namespace trident::comm {

bool is_16bit(DType dtype);
void widen(DType dtype, const void* in, float* out, size_t n);   // out (n) = in (n, 16-bit)
void narrow(DType dtype, const float* in, void* out, size_t n);  // out (n, 16-bit) = in rounded

}  // namespace trident::comm
