// Widening and rounding of 16-bit collective buffers.
#include "comm/wrappers/widen.hpp"

#include <cstdint>

#include "tensor/low16.hpp"

namespace trident::comm {

bool is_16bit(DType dtype) { return dtype == DType::bf16 || dtype == DType::fp16; }

void widen(DType dtype, const void* in, float* out, size_t n) {
  const uint16_t* from = static_cast<const uint16_t*>(in);
  if (dtype == DType::bf16)
    for (size_t i = 0; i < n; ++i) out[i] = Bf16::widen(from[i]);
  else
    for (size_t i = 0; i < n; ++i) out[i] = Fp16::widen(from[i]);
}

void narrow(DType dtype, const float* in, void* out, size_t n) {
  uint16_t* to = static_cast<uint16_t*>(out);
  if (dtype == DType::bf16)
    for (size_t i = 0; i < n; ++i) to[i] = Bf16::round(in[i]);
  else
    for (size_t i = 0; i < n; ++i) to[i] = Fp16::round(in[i]);
}

}  // namespace trident::comm
