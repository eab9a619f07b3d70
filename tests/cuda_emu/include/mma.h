// The CUDA emulator's warp matrix operations (nvcuda::wmma; tests/cuda_emu/README.md). A fragment
// holds its lane's share of a 16 × 16 tile: lane l the elements l·8 … l·8 + 7 of the tile in row
// order (CUDA leaves the mapping unspecified, so a kernel may not depend on it, and ours do not).
// Loads, stores and fills are each lane's own; mma_sync is the warp's: every lane brings its
// fragments to one barrier, where D = A·B + C is computed once in f32 (the products of 16-bit
// operands are exact in f32; summed in k order) and handed out (cuda_emu::meet_warp).
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

namespace detail {
template <class TA, class LA, class TB, class LB>
struct MmaPart {
  fragment<accumulator, 16, 16, 16, float>* d;
  const fragment<matrix_a, 16, 16, 16, TA, LA>* a;
  const fragment<matrix_b, 16, 16, 16, TB, LB>* b;
  const fragment<accumulator, 16, 16, 16, float>* c;
};
// The warp's D = A·B + C, once, at the barrier every lane reaches: the tiles gathered from the
// lanes' fragments (widened to f32), each element summed from C in k order, then D handed out —
// after every read, so D may be C.
template <class TA, class LA, class TB, class LB>
void mma_lanes(void* const* parts, uint32_t lanes) {
  if (lanes != 0xffffffffu) return cuda_emu::kernel_error("mma_sync without every lane of the warp");
  float a[256], b[256], d[256];
  for (int l = 0; l < 32; ++l) {
    const auto* p = static_cast<const MmaPart<TA, LA, TB, LB>*>(parts[l]);
    for (int e = 0; e < 8; ++e) {
      a[l * 8 + e] = to_float(p->a->x[e]);
      b[l * 8 + e] = to_float(p->b->x[e]);
      d[l * 8 + e] = p->c->x[e];
    }
  }
  for (int index = 0; index < 256; ++index) {
    const int row = index / 16, column = index % 16;
    float sum = d[index];
    for (int k = 0; k < 16; ++k) sum += a[row * 16 + k] * b[k * 16 + column];
    d[index] = sum;
  }
  for (int l = 0; l < 32; ++l) {
    auto* p = static_cast<const MmaPart<TA, LA, TB, LB>*>(parts[l]);
    for (int e = 0; e < 8; ++e) p->d->x[e] = d[l * 8 + e];
  }
}
}  // namespace detail

template <class TA, class LA, class TB, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TB, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  detail::MmaPart<TA, LA, TB, LB> part{&d, &a, &b, &c};
  cuda_emu::meet_warp(0xffffffffu, &part, detail::mma_lanes<TA, LA, TB, LB>);
}

}  // namespace nvcuda::wmma
