// The CUDA emulator's warp matrix operations (nvcuda::wmma; tests/cuda_emu/README.md). A fragment
// holds its lane's share of a 16 × 16 tile: lane l the elements l·8 … l·8 + 7 of the tile in row
// order (CUDA leaves the mapping unspecified, so a kernel may not depend on it, and ours do not).
// Loads, stores and fills are each lane's own; mma_sync is the warp's: every lane publishes its
// fragments, the warp meets, each lane computes its share of D = A·B + C in f32 (the products of
// 16-bit operands are exact in f32; summed in k order), and the warp meets again before any
// lane writes D (which may be C).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
inline float to_float(float x) { return x; }
inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float to_float(__half x) { return __half2float(x); }
template <class T>
T from_float(float x);
template <>
inline float from_float<float>(float x) { return x; }
template <>
inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
inline __half from_float<__half>(float x) { return __float2half_rn(x); }
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has the 16 × 16 × 16 shape only");
  static constexpr int num_elements = 16 * 16 / 32;
  T x[num_elements];
};

namespace detail {
// Where the calling lane's element e of a 16 × 16 tile lies in memory of leading dimension ldm.
inline size_t offset(int e, unsigned ldm, bool column_major) {
  const int index = cuda_emu::lane_id() * 8 + e, row = index / 16, column = index % 16;
  return column_major ? static_cast<size_t>(column) * ldm + row : static_cast<size_t>(row) * ldm + column;
}
template <class Fragment, class T>
void load(Fragment& f, const T* ptr, unsigned ldm, bool column_major) {
  for (int e = 0; e < f.num_elements; ++e) f.x[e] = ptr[offset(e, ldm, column_major)];
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float value) {
  for (T& x : f.x) x = detail::from_float<T>(value);
}

template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* ptr, unsigned ldm) {
  static_assert(!std::is_void_v<Layout>, "an accumulator's load names its memory layout");
  detail::load(f, ptr, ldm, std::is_same_v<Layout, col_major>);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* ptr, unsigned ldm,
                             layout_t layout) {
  detail::load(f, ptr, ldm, layout == mem_col_major);
}

inline void store_matrix_sync(float* ptr, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
  for (int e = 0; e < f.num_elements; ++e) ptr[detail::offset(e, ldm, layout == mem_col_major)] = f.x[e];
}

template <class TA, class LA, class TB, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TB, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  struct Operands {
    const fragment<matrix_a, 16, 16, 16, TA, LA>* a;
    const fragment<matrix_b, 16, 16, 16, TB, LB>* b;
  };
  const int lane = cuda_emu::lane_id();
  const Operands own{&a, &b};
  const Operands* published = &own;
  std::memcpy(cuda_emu::warp_slot(lane), &published, sizeof published);
  cuda_emu::sync_warp(0xffffffffu);
  auto operands = [](int l) {
    const Operands* p;
    std::memcpy(&p, cuda_emu::warp_slot(l), sizeof p);
    return p;
  };
  float out[8];
  for (int e = 0; e < 8; ++e) {
    const int index = lane * 8 + e, row = index / 16, column = index % 16;
    float sum = c.x[e];
    for (int k = 0; k < 16; ++k) {
      const int ia = row * 16 + k, ib = k * 16 + column;  // the logical (row-order) index in each tile
      sum += detail::to_float(operands(ia / 8)->a->x[ia % 8]) * detail::to_float(operands(ib / 8)->b->x[ib % 8]);
    }
    out[e] = sum;
  }
  cuda_emu::sync_warp(0xffffffffu);
  for (int e = 0; e < 8; ++e) d.x[e] = out[e];
}

}  // namespace nvcuda::wmma
