// 16-bit buffers (bf16, fp16) in the collectives: widened to f32, reduced in f32, and rounded
// back once to nearest even — the rounding of the kernels' 16-bit storage (kernels/cpu/low16.cpp),
// so a reduced 16-bit value is what storing the f32 sum would give.
#pragma once

#include <cstddef>
#include <vector>

#include "tensor/device.hpp"

namespace trident::comm {

bool is_16bit(DType dtype);
void widen(DType dtype, const void* in, float* out, size_t n);   // out (n) = in (n, 16-bit)
void narrow(DType dtype, const float* in, void* out, size_t n);  // out (n, 16-bit) = in rounded

// Runs f(float* values) on `count` elements of `data`: data itself when it holds f32, else a
// copy widened into `scratch` whose result is rounded back into data.
template <class F>
void as_f32(void* data, size_t count, DType dtype, std::vector<float>& scratch, F&& f) {
  if (!is_16bit(dtype)) return f(static_cast<float*>(data));
  if (scratch.size() < count) scratch.resize(count);
  widen(dtype, data, scratch.data(), count);
  f(scratch.data());
  narrow(dtype, scratch.data(), data, count);
}

}  // namespace trident::comm
