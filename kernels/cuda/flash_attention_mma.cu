// The memory-efficient attention of 16-bit models on the tensor cores: FlashAttention-2's tiles
// (Dao 2023, Algorithms 1 and 2) with nvcuda::wmma's 16×16×16 products, operands in the model's
// 16-bit type (ctx.attention_operands: bf16 or fp16), every sum in f32. The arithmetic is
// FlashAttention's: q, k and v are read as the model keeps them, in that type (no f32 copy), dy
// is rounded to it as its tile is loaded, and the probabilities P and dS are rounded before
// their products; the softmax statistics (m, l, the log-sum-exp L) and D = dy·y (of dy as
// rounded) stay f32. The CPU (kernels/cpu/flash_attention.cpp) keeps dy, P and dS in f32, so the
// two agree to those roundings (one 16-bit unit), not to the bit: tests/gpu's
// flash_attention_bf16.
//
// A block is 4 warps and one tile of 64 queries (forward, dq) or keys (dk, dv), each warp 16 of
// its rows; the tiles of the other side pass through shared memory 64 rows at a time. Per pair of
// tiles, a warp computes its 16 × 64 products on the tensor cores into f32 fragments, stores them
// to its rows of shared memory (wmma does not say which lane holds which element), applies the mask
// and the exponentials there lane by lane, and writes P or dS back as 16-bit operands of the next
// products.
//
// Forward (a block per (batch, head, query tile), the costliest tiles of the causal mask first),
// for each key tile j up to the diagonal:
//   S = q kⱼᵀ · scale;  m' = max(m, rowmax S);  P = exp(S − m');  l = l·exp(m − m') + rowsum P;
//   o = o·exp(m − m') + P vⱼ  (o in shared memory, each row rescaled by the two lanes that own it);  m = m'
// then y = o / l and L = m + log l, or, for a ring block after the first, folded into y and L.
// Backward, with P = exp(q kᵀ · scale − L), D = rowsum(dy ⊙ y), dP = dy vᵀ and dS = P ⊙ (dP − D) ·
// scale, in two kernels so that every gradient has one writer and no atomics (the same sums every
// run), each recomputing P:
//   queries (a block per query tile, over the key tiles it sees):    dq += dS k  (and D, kept)
//   keys (a block per key tile, over the query tiles that see it):  dv += Pᵀ dy;  dk += dSᵀ q
// dk, dv and dq are held in f32 fragments across the loop and added to the gradients at its end.
// Grouped-query attention's heads are read as they are (HeadRows::kv_head): a query head's tiles
// meet its key/value head's keys, and a keys' block (of a key/value head) goes over the query
// tiles of its group's heads in turn.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/common/math.hpp"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/flash_attention.cuh"

namespace trident::kernels::cuda {
namespace {
namespace wmma = nvcuda::wmma;

constexpr int kWarps = 4;           // a block's warps
constexpr int kTile = 16 * kWarps;  // a tile's queries or keys: 16 rows a warp
constexpr int kThreadsPerBlock = 32 * kWarps;
__host__ __device__ constexpr int tiles_of(int n) { return (n + kTile - 1) / kTile; }  // a block's tiles of n rows
// Row padding in elements (16 bytes), so that the 16 rows a fragment reads fall on different
// banks; every fragment's first element stays 32-byte aligned, as wmma's loads and stores need.
constexpr int kPad16 = 8, kPad32 = 4;

template <bool fp16>
using Operand = std::conditional_t<fp16, __half, __nv_bfloat16>;
template <class T>
__device__ inline T to_operand(float x);
template <>
__device__ inline __nv_bfloat16 to_operand(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ inline __half to_operand(float x) { return __float2half_rn(x); }
// The operand's bits, for packed stores.
__device__ inline uint32_t operand_bits(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
__device__ inline uint32_t operand_bits(__half x) { return __half_as_ushort(x); }

template <class T>
using RowsA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;  // 16 rows of a row-major tile
template <class T>
using RowsB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;  // a 16 × 16 block of a row-major tile
template <class T>
using ColumnsB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;  // the same, transposed: 16 rows as columns
using Sums = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Shared memory carved in 128-byte pieces, in byte offsets, the same on the host (the launch's
// size) and on the device.
struct Carve {
  size_t used = 0;
  template <class T>
  __host__ __device__ size_t take(size_t n) {
    const size_t at = used;
    used += (n * sizeof(T) + 127) / 128 * 128;
    return at;
  }
};

// The shared memory of a block, in byte offsets. ld: a 16-bit row of hs channels (q, k, v, dy);
// ldp: a 16-bit row of 64 probabilities or dS; lds: an f32 row of 64 products (forward), or of
// max(64, hs) (backward: the rows hold the gradients at the end); ldo: an f32 row of hs outputs.
template <int HS>
struct Tiles {
  static constexpr int ld = HS + kPad16, ldp = kTile + kPad16, ldo = HS + kPad32;
  static constexpr int lds_forward = kTile + kPad32, lds_backward = (HS > kTile ? HS : kTile) + kPad32;
};

template <int HS>
struct ForwardLayout {
  size_t q, k, v, s, p, o, row_max, row_sum, bytes;
  __host__ __device__ ForwardLayout() {
    Carve c;
    q = c.take<uint16_t>(kTile * Tiles<HS>::ld), k = c.take<uint16_t>(kTile * Tiles<HS>::ld);
    v = c.take<uint16_t>(kTile * Tiles<HS>::ld), s = c.take<float>(kTile * Tiles<HS>::lds_forward);
    p = c.take<uint16_t>(kTile * Tiles<HS>::ldp), o = c.take<float>(kTile * Tiles<HS>::ldo);
    row_max = c.take<float>(kTile), row_sum = c.take<float>(kTile);
    bytes = c.used;
  }
};

// Both backward kernels: k, v, q, dy tiles, the f32 products S and dP, the 16-bit P (keys only)
// and dS, and the query rows' L and D.
template <int HS>
struct BackwardLayout {
  size_t k, v, q, dy, s, dp, p, ds, L, D, bytes;
  __host__ __device__ explicit BackwardLayout(bool keys) {
    Carve c;
    k = c.take<uint16_t>(kTile * Tiles<HS>::ld), v = c.take<uint16_t>(kTile * Tiles<HS>::ld);
    q = c.take<uint16_t>(kTile * Tiles<HS>::ld), dy = c.take<uint16_t>(kTile * Tiles<HS>::ld);
    s = c.take<float>(kTile * Tiles<HS>::lds_backward), dp = c.take<float>(kTile * Tiles<HS>::lds_backward);
    p = keys ? c.take<uint16_t>(kTile * Tiles<HS>::ldp) : 0;
    ds = c.take<uint16_t>(kTile * Tiles<HS>::ldp);
    L = c.take<float>(kTile), D = c.take<float>(kTile);
    bytes = c.used;
  }
};

template <class T>
__device__ inline T* at(unsigned char* smem, size_t offset) {
  return reinterpret_cast<T*>(smem + offset);
}

// The backward kernels' shared memory as pointers (p: the keys' kernel alone).
template <int HS, class T>
struct BackwardTiles {
  T *k, *v, *q, *dy, *p, *ds;
  float *s, *dp, *L, *D;
  __device__ BackwardTiles(unsigned char* smem, bool keys) {
    const BackwardLayout<HS> layout(keys);
    k = at<T>(smem, layout.k), v = at<T>(smem, layout.v), q = at<T>(smem, layout.q), dy = at<T>(smem, layout.dy);
    p = keys ? at<T>(smem, layout.p) : nullptr, ds = at<T>(smem, layout.ds);
    s = at<float>(smem, layout.s), dp = at<float>(smem, layout.dp), L = at<float>(smem, layout.L);
    D = at<float>(smem, layout.D);
  }
};

// Four consecutive values as the operand type's bits, packed: f32 ones rounded (one 16-byte load
// where 16-byte aligned), values of the operand type as they are (one 8-byte load where 8-byte
// aligned). Rows of a buffer whose widths are multiples of 4, as the model's are, always are.
template <class T>
__device__ inline uint2 packed4(const float* from) {
  float4 x;
  if (reinterpret_cast<uintptr_t>(from) % 16 == 0) x = *reinterpret_cast<const float4*>(from);
  else x = make_float4(from[0], from[1], from[2], from[3]);
  return uint2{operand_bits(to_operand<T>(x.x)) | operand_bits(to_operand<T>(x.y)) << 16,
               operand_bits(to_operand<T>(x.z)) | operand_bits(to_operand<T>(x.w)) << 16};
}
template <class T>
__device__ inline uint2 packed4(const T* from) {
  if (reinterpret_cast<uintptr_t>(from) % 8 == 0) return *reinterpret_cast<const uint2*>(from);
  return uint2{operand_bits(from[0]) | operand_bits(from[1]) << 16, operand_bits(from[2]) | operand_bits(from[3]) << 16};
}

// A tile's 64 rows of hs channels in the operand type: row r from row(r) (f32, rounded, or the
// operand type itself) where r < valid, zeros past it. Four channels a thread at a time,
// consecutive threads along a row.
template <int HS, class T, class Row>
__device__ void load_tile(T* tile, int valid, Row row) {
  for (int i = threadIdx.x; i < kTile * HS / 4; i += kThreadsPerBlock) {
    const int r = i / (HS / 4), d = i % (HS / 4) * 4;
    // One 8-byte store (rows of ld·2 bytes, a multiple of 16; d a multiple of 4): lanes on
    // distinct banks, where four 2-byte stores put two lanes on each.
    *reinterpret_cast<uint2*>(tile + r * Tiles<HS>::ld + d) = r < valid ? packed4<T>(row(r) + d) : uint2{0u, 0u};
  }
}

// The key tile at k_begin of key/value head g: k and v rows, as kept.
template <int HS, class T>
__device__ void load_keys(T* k, T* v, const HeadRows& rows, int b, int g, int k_begin) {
  const int valid = min(kTile, rows.n - k_begin);
  load_tile<HS>(k, valid, [&](int r) { return rows.k<T>(b, g, k_begin + r); });
  load_tile<HS>(v, valid, [&](int r) { return rows.k<T>(b, g, k_begin + r) + rows.Ckv(); });
}

// Where a block's tile and head are: blocks run (batch, head, tile) with the tile fastest, over
// `heads` (the query heads, or the keys' kernel's key/value heads); reversed: the last tile first
// (the costliest under the causal mask for queries).
struct BlockTile {
  int b, h, begin, valid;
  __device__ BlockTile(const HeadRows& rows, int heads, bool reversed) {
    const int tiles = tiles_of(rows.n), index = static_cast<int>(blockIdx.x % tiles);
    const int tile = reversed ? tiles - 1 - index : index;
    h = static_cast<int>(blockIdx.x / tiles % heads);
    b = static_cast<int>(blockIdx.x / tiles / heads);
    begin = tile * kTile;
    valid = min(kTile, rows.n - begin);
  }
};

// out (16 × 64, f32, row stride lds) = the warp's 16 rows of a (row-major, stride ld) times the 64
// rows of b (row-major, stride ld) transposed: a · bᵀ over hs channels.
template <int HS, class T>
__device__ void rows_times_rows(float* out, int lds, const T* a, const T* b) {
  constexpr int ld = Tiles<HS>::ld;
  Sums sums[kTile / 16];
#pragma unroll
  for (int c = 0; c < kTile / 16; ++c) wmma::fill_fragment(sums[c], 0.0f);
#pragma unroll
  for (int d = 0; d < HS; d += 16) {
    RowsA<T> rows;
    wmma::load_matrix_sync(rows, a + d, ld);
#pragma unroll
    for (int c = 0; c < kTile / 16; ++c) {
      ColumnsB<T> columns;
      wmma::load_matrix_sync(columns, b + c * 16 * ld + d, ld);
      wmma::mma_sync(sums[c], rows, columns, sums[c]);
    }
  }
#pragma unroll
  for (int c = 0; c < kTile / 16; ++c) wmma::store_matrix_sync(out + c * 16, sums[c], lds, wmma::mem_row_major);
}

// sums[d/16] (16 × hs) += the warp's 16 rows of p (16-bit, 64 columns, stride ldp) times the 64
// rows of x (row-major, stride ld).
template <int HS, class T>
__device__ void accumulate_product(Sums (&sums)[HS / 16], const T* p, const T* x) {
#pragma unroll
  for (int c = 0; c < kTile; c += 16) {
    RowsA<T> rows;
    wmma::load_matrix_sync(rows, p + c, Tiles<HS>::ldp);
#pragma unroll
    for (int d = 0; d < HS / 16; ++d) {
      RowsB<T> block;
      wmma::load_matrix_sync(block, x + c * Tiles<HS>::ld + d * 16, Tiles<HS>::ld);
      wmma::mma_sync(sums[d], rows, block, sums[d]);
    }
  }
}

template <int HS, bool fp16>
__global__ void __launch_bounds__(kThreadsPerBlock)
    forward_kernel(void* out, float* lse, HeadRows rows, float scale, bool combine) {
  using T = Operand<fp16>;
  constexpr int ld = Tiles<HS>::ld, ldp = Tiles<HS>::ldp, lds = Tiles<HS>::lds_forward, ldo = Tiles<HS>::ldo;
  extern __shared__ __align__(128) unsigned char smem[];
  const ForwardLayout<HS> layout;
  T *q = at<T>(smem, layout.q), *k = at<T>(smem, layout.k), *v = at<T>(smem, layout.v), *p = at<T>(smem, layout.p);
  float *s = at<float>(smem, layout.s), *o = at<float>(smem, layout.o), *row_max = at<float>(smem, layout.row_max),
        *row_sum = at<float>(smem, layout.row_sum);  // m and l at the end, for the output's rows
  const BlockTile tile(rows, rows.NH, true);
  const int lane = threadIdx.x % 32, r0 = threadIdx.x / 32 * 16;  // the warp's rows: [r0, r0 + 16)
  const int side = lane % 2, r = r0 + lane / 2, t = tile.begin + r;  // the lane's row (softmax) and its half of it
  float m = -INFINITY, l = 0.0f;                                      // the row's running max and sum

  load_tile<HS>(q, tile.valid, [&](int row) { return rows.q<T>(tile.b, tile.h, tile.begin + row); });
  for (int i = threadIdx.x; i < kTile * HS; i += kThreadsPerBlock) o[i / HS * ldo + i % HS] = 0.0f;
  const int key_end = rows.causal ? min(rows.n, tile.begin + tile.valid) : rows.n;
  for (int k_begin = 0; k_begin < key_end; k_begin += kTile) {
    __syncthreads();  // every warp is done with the last k and v (the first time: q and o set)
    load_keys<HS>(k, v, rows, tile.b, rows.kv_head(tile.h), k_begin);
    __syncthreads();
    rows_times_rows<HS>(s + r0 * lds, lds, q + r0 * ld, k);
    __syncwarp();
    // The online softmax: lanes 2·rr and 2·rr + 1 own row r0 + rr, 32 of its 64 keys each, and
    // hold its m and l in registers (both lanes the same values). A lane visits its columns from
    // a start of its own, (j + lane) mod 32, so that the 32 lanes read 32 different banks (the
    // rows are 68 floats apart).
    {
      float x[32], top = -INFINITY;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int c = side * 32 + (j + lane) % 32, key = k_begin + c;
        const bool seen = key < rows.n && (!rows.causal || key <= t);
        x[j] = seen ? s[r * lds + c] * scale : -INFINITY;
        top = fmaxf(top, x[j]);
      }
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
      const float m_new = fmaxf(m, top);
      const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing seen yet (padding)
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const float e = x[j] == -INFINITY ? 0.0f : vexp(x[j] - base);
        sum += e;
        p[r * ldp + side * 32 + (j + lane) % 32] = to_operand<T>(e);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const float correction = m == -INFINITY ? 0.0f : vexp(m - base);
      l = l * correction + sum;
      m = m_new;
      // o's row ·= the correction, by the same two lanes (HS/2 channels each, again from a start
      // of their own).
#pragma unroll 8
      for (int j = 0; j < HS / 2; ++j) o[r * ldo + side * (HS / 2) + (j + lane) % (HS / 2)] *= correction;
    }
    __syncwarp();
#pragma unroll
    for (int d = 0; d < HS; d += 16) {  // o += P v, a 16-channel block of the output at a time
      Sums sums;
      wmma::load_matrix_sync(sums, o + r0 * ldo + d, ldo, wmma::mem_row_major);
#pragma unroll
      for (int c = 0; c < kTile; c += 16) {
        RowsA<T> probabilities;
        RowsB<T> values;
        wmma::load_matrix_sync(probabilities, p + r0 * ldp + c, ldp);
        wmma::load_matrix_sync(values, v + c * ld + d, ld);
        wmma::mma_sync(sums, probabilities, values, sums);
      }
      wmma::store_matrix_sync(o + r0 * ldo + d, sums, ldo, wmma::mem_row_major);
    }
    __syncwarp();
  }
  // y = o / l and L = m + log l, or folded into what out and lse hold (as the warp kernels), a row
  // at a time across the warp's lanes.
  if (side == 0) row_max[r] = m, row_sum[r] = l;
  __syncwarp();
  for (int rr = 0; rr < 16; ++rr) {
    const int row = r0 + rr, position = tile.begin + row;
    if (row >= tile.valid) break;
    const float sum = row_sum[row], block_lse = row_max[row] + logf(sum);
    const size_t y = rows.row(tile.b, tile.h, position);
    float& row_lse = lse[rows.stat(tile.b, tile.h, position)];
    const float old_lse = combine ? row_lse : block_lse, top = fmaxf(old_lse, block_lse);
    const float merged = combine ? top + logf(vexp(old_lse - top) + vexp(block_lse - top)) : block_lse;
    const float keep = combine ? vexp(old_lse - merged) : 0.0f, add = combine ? vexp(block_lse - merged) / sum : 0.0f;
    for (int d = lane; d < HS; d += 32) {
      const float value = o[row * ldo + d];
      if (combine) static_cast<float*>(out)[y + d] = static_cast<float*>(out)[y + d] * keep + value * add;
      else rows.set_y(out, y + d, value / sum);
    }
    __syncwarp();  // every lane has read the old lse before lane 0 writes the new
    if (lane == 0) row_lse = merged;
  }
}

// The query side of a pair of tiles in backward: q as kept, dy rounded, and per query row its L
// and D = dy·y. The queries' kernel (out not null) sums D in f32 from dy rounded as its tile is
// (the dy that dP = dy vᵀ sees: so Σₖ P·dP = D, and each row's dS sums to 0, up to the sums'
// rounding, as the softmax's gradient has it — from dy's f32 values, every dS of a row carried
// P times the difference, and a query that sees one key got a dq of its own rounding, not 0)
// and y's (f32 or 16-bit), a warp per 16 rows, and leaves it in deltas_out (B, NH, T) for the
// keys' kernel, which reads it there (deltas_in; out null) instead of reading dy and y again for
// every key tile.
template <int HS, class T>
__device__ void load_queries(const BackwardTiles<HS, T>& tiles, const HeadRows& rows, const float* dout,
                             const void* out, const float* lse, const float* deltas_in, float* deltas_out,
                             int b, int h, int q_begin, int q_valid) {
  load_tile<HS>(tiles.q, q_valid, [&](int r) { return rows.q<T>(b, h, q_begin + r); });
  load_tile<HS>(tiles.dy, q_valid, [&](int r) { return dout + rows.row(b, h, q_begin + r); });
  const int lane = threadIdx.x % 32, r0 = threadIdx.x / 32 * 16;
  for (int rr = 0; rr < 16; ++rr) {
    const int r = r0 + rr, t = q_begin + r;
    const bool valid = r < q_valid;
    float delta = 0.0f;
    if (out != nullptr) {
      if (valid)
        for (int d = lane; d < HS; d += 32)
          delta += widen_value(to_operand<T>(dout[rows.row(b, h, t) + d])) * rows.y_at(out, rows.row(b, h, t) + d);
      delta = warp_reduce(delta, SumOp{});
      if (lane == 0 && valid) deltas_out[rows.stat(b, h, t)] = delta;
    } else if (valid) {
      delta = deltas_in[rows.stat(b, h, t)];
    }
    if (lane == 0) tiles.D[r] = delta, tiles.L[r] = valid ? lse[rows.stat(b, h, t)] : 0.0f;
  }
}

// dS (and, for the keys' kernel, P) of the warp's 16 rows from S and dP in shared memory.
// transposed: the rows are keys and the columns queries (the keys' kernel); else the reverse.
template <int HS, class T>
__device__ void probabilities_and_ds(const BackwardTiles<HS, T>& tiles, const HeadRows& rows, int r0, int row_begin,
                                     int column_begin, bool transposed, float scale) {
  constexpr int lds = Tiles<HS>::lds_backward, ldp = Tiles<HS>::ldp;
  const int lane = threadIdx.x % 32;
  for (int rr = 0; rr < 16; ++rr) {
    const int r = r0 + rr;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int c = lane + 32 * j;
      const int query = transposed ? column_begin + c : row_begin + r, key = transposed ? row_begin + r : column_begin + c;
      const int qi = transposed ? c : r;  // the query's row of the tile: its L and D
      const bool seen = query < rows.n && key < rows.n && (!rows.causal || key <= query);
      const float prob = seen ? vexp(tiles.s[r * lds + c] * scale - tiles.L[qi]) : 0.0f;
      if (tiles.p != nullptr) tiles.p[r * ldp + c] = to_operand<T>(prob);
      tiles.ds[r * ldp + c] = to_operand<T>(prob * (tiles.dp[r * lds + c] - tiles.D[qi]) * scale);
    }
  }
}

// The warp's 16 rows of f32 fragments (16 × hs), through its rows of `scratch`, added to (or, not
// accumulate, written into) the rows of `gradients` at offsets `row(r)` (and their 16-bit copy:
// HeadRows::set_gradient), rows past `valid` left alone.
template <int HS, class Row>
__device__ void write_rows(Sums (&sums)[HS / 16], float* scratch, int r0, int valid, bool accumulate,
                           const HeadRows& rows, float* gradients, Row row) {
  constexpr int lds = Tiles<HS>::lds_backward;
#pragma unroll
  for (int d = 0; d < HS / 16; ++d) wmma::store_matrix_sync(scratch + r0 * lds + d * 16, sums[d], lds, wmma::mem_row_major);
  __syncwarp();
  for (int i = threadIdx.x % 32; i < 16 * HS; i += 32) {
    const int r = r0 + i / HS, d = i % HS;
    if (r >= valid) continue;
    const size_t at = row(r) + d;
    rows.set_gradient(gradients, at, (accumulate ? gradients[at] : 0.0f) + scratch[r * lds + d]);
  }
}

// dk and dv of a key tile of key/value head g (into dkv, of kv's layout), over the query tiles
// of the group's heads, head by head, that see it; D from deltas, where the queries' kernel left it.
template <int HS, bool fp16>
__global__ void __launch_bounds__(kThreadsPerBlock)
    key_gradients_kernel(float* dkv, const float* dout, const float* deltas, const float* lse, HeadRows rows,
                         float scale, bool accumulate) {
  using T = Operand<fp16>;
  constexpr int ld = Tiles<HS>::ld, lds = Tiles<HS>::lds_backward, ldp = Tiles<HS>::ldp;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardTiles<HS, T> t(smem, true);
  const BlockTile tile(rows, rows.KV, false);  // the first key tiles are seen by the most queries
  const int r0 = threadIdx.x / 32 * 16, g = tile.h;

  load_keys<HS>(t.k, t.v, rows, tile.b, g, tile.begin);
  Sums dk[HS / 16], dv[HS / 16];
#pragma unroll
  for (int d = 0; d < HS / 16; ++d) wmma::fill_fragment(dk[d], 0.0f), wmma::fill_fragment(dv[d], 0.0f);
  // Tiles of queries and keys start at the same multiples of 64: under the causal mask the first
  // query tile that sees this key tile is the one at its rows. The pairs (query head, query tile)
  // in one loop: head h = g·group + i / tiles.
  const int first = rows.causal ? tile.begin / kTile : 0, tiles = tiles_of(rows.n) - first;
  for (int i = 0; i < rows.group() * tiles; ++i) {
    const int h = g * rows.group() + i / tiles, q_begin = (first + i % tiles) * kTile;
    __syncthreads();  // every warp is done with the last q, dy, L and D
    load_queries<HS>(t, rows, dout, nullptr, lse, deltas, nullptr, tile.b, h, q_begin, min(kTile, rows.n - q_begin));
    __syncthreads();
    rows_times_rows<HS>(t.s + r0 * lds, lds, t.k + r0 * ld, t.q);    // Sᵀ: the warp's keys against the queries
    rows_times_rows<HS>(t.dp + r0 * lds, lds, t.v + r0 * ld, t.dy);  // dPᵀ
    __syncwarp();
    probabilities_and_ds<HS>(t, rows, r0, tile.begin, q_begin, true, scale);
    __syncwarp();
    accumulate_product<HS>(dv, t.p + r0 * ldp, t.dy);  // dv += Pᵀ dy
    accumulate_product<HS>(dk, t.ds + r0 * ldp, t.q);  // dk += dSᵀ q
    __syncwarp();
  }
  const auto key_row = [&](int r) { return rows.k_offset(tile.b, g, tile.begin + r); };
  write_rows<HS>(dk, t.s, r0, tile.valid, accumulate, rows, dkv, key_row);
  write_rows<HS>(dv, t.dp, r0, tile.valid, accumulate, rows, dkv, [&](int r) { return key_row(r) + rows.Ckv(); });
}

// dq of a query tile (the q columns of dqkv), over the key tiles it sees; its rows' D into deltas.
template <int HS, bool fp16>
__global__ void __launch_bounds__(kThreadsPerBlock)
    query_gradients_kernel(float* dqkv, const float* dout, const void* out, const float* lse, float* deltas,
                           HeadRows rows, float scale, bool accumulate) {
  using T = Operand<fp16>;
  constexpr int ld = Tiles<HS>::ld, lds = Tiles<HS>::lds_backward, ldp = Tiles<HS>::ldp;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardTiles<HS, T> t(smem, false);
  const BlockTile tile(rows, rows.NH, true);
  const int r0 = threadIdx.x / 32 * 16;

  load_queries<HS>(t, rows, dout, out, lse, nullptr, deltas, tile.b, tile.h, tile.begin, tile.valid);
  Sums dq[HS / 16];
#pragma unroll
  for (int d = 0; d < HS / 16; ++d) wmma::fill_fragment(dq[d], 0.0f);
  const int key_end = rows.causal ? min(rows.n, tile.begin + tile.valid) : rows.n;
  for (int k_begin = 0; k_begin < key_end; k_begin += kTile) {
    __syncthreads();  // every warp is done with the last k and v (the first time: q, dy, L, D loaded)
    load_keys<HS>(t.k, t.v, rows, tile.b, rows.kv_head(tile.h), k_begin);
    __syncthreads();
    rows_times_rows<HS>(t.s + r0 * lds, lds, t.q + r0 * ld, t.k);    // S: the warp's queries against the keys
    rows_times_rows<HS>(t.dp + r0 * lds, lds, t.dy + r0 * ld, t.v);  // dP
    __syncwarp();
    probabilities_and_ds<HS>(t, rows, r0, tile.begin, k_begin, false, scale);
    __syncwarp();
    accumulate_product<HS>(dq, t.ds + r0 * ldp, t.k);  // dq += dS k
    __syncwarp();
  }
  write_rows<HS>(dq, t.s, r0, tile.valid, accumulate, rows, dqkv,
                 [&](int r) { return rows.q_offset(tile.b, tile.h, tile.begin + r); });
}

// launch(std::integral_constant<int, hs>) for the head sizes the kernels are built for.
template <class Launch>
void with_head_size(int hs, Launch&& launch) {
  if (hs == 32) launch(std::integral_constant<int, 32>{});
  else if (hs == 64) launch(std::integral_constant<int, 64>{});
  else if (hs == 128) launch(std::integral_constant<int, 128>{});
  else throw std::logic_error("the tensor-core attention has no kernel for heads of " + std::to_string(hs) + " channels");
}

// The largest shared memory of the three kernels for heads of hs channels.
template <int HS>
size_t largest_layout() {
  const size_t forward = ForwardLayout<HS>().bytes, keys = BackwardLayout<HS>(true).bytes;
  return forward > keys ? forward : keys;  // the queries' kernel holds one 16-bit tile fewer than the keys'
}

// A block per (batch, head, tile) of `heads` heads.
unsigned tile_blocks(const HeadRows& rows, int B, int heads) {
  return static_cast<unsigned>(size_t(B) * heads * tiles_of(rows.n));
}

}  // namespace

// Heads of 128 channels need 152 KiB for the keys' kernel: an A100's or H100's blocks may have
// it (163 and 227 KiB), an sm_86 or sm_89 GPU's (99 KiB) may not, and there the warp kernels run.
bool mma_attention_takes(int hs, Precision operands, Precision values) {
  if (operands == Precision::fp32 || values != operands || (hs != 32 && hs != 64 && hs != 128)) return false;
  size_t bytes = 0;
  with_head_size(hs, [&](auto size) { bytes = largest_layout<decltype(size)::value>(); });
  return bytes <= shared_memory_limit();
}

void mma_attention_forward(Context& ctx, void* out, float* lse, const HeadRows& rows, int B, bool combine) {
  with_type(ctx.attention_operands, [&](auto fp16) {
    with_head_size(rows.hs, [&](auto hs) {
      constexpr int HS = decltype(hs)::value;
      constexpr bool F = decltype(fp16)::value;
      const size_t bytes = ForwardLayout<HS>().bytes;
      static const bool allowed = (allow_shared(forward_kernel<HS, F>, bytes), true);
      (void)allowed;
      forward_kernel<HS, F><<<tile_blocks(rows, B, rows.NH), kThreadsPerBlock, bytes, stream_of(ctx)>>>(
          out, lse, rows, rows.scale(), combine);
    });
  });
  check_launch("flash_attention_forward (tensor cores)");
}

// The queries' kernel writes dq and each row's D, then the keys' kernel dk and dv, one after the
// other on the stream; D lives in a stream-ordered scratch of (B, NH, T) floats between them.
void mma_attention_backward(Context& ctx, float* dqkv, float* dkv, const float* dout, const void* out,
                            const float* lse, const HeadRows& rows, int B, bool accumulate) {
  with_type(ctx.attention_operands, [&](auto fp16) {
    with_head_size(rows.hs, [&](auto hs) {
      constexpr int HS = decltype(hs)::value;
      constexpr bool F = decltype(fp16)::value;
      const size_t key_bytes = BackwardLayout<HS>(true).bytes, query_bytes = BackwardLayout<HS>(false).bytes;
      static const bool allowed = (allow_shared(key_gradients_kernel<HS, F>, key_bytes),
                                   allow_shared(query_gradients_kernel<HS, F>, query_bytes), true);
      (void)allowed;
      float* deltas = stream_scratch(ctx, size_t(B) * rows.NH * rows.T, "cudaMallocAsync (flash attention's D)");
      query_gradients_kernel<HS, F><<<tile_blocks(rows, B, rows.NH), kThreadsPerBlock, query_bytes, stream_of(ctx)>>>(
          dqkv, dout, out, lse, deltas, rows, rows.scale(), accumulate);
      check_launch("flash_attention_backward (tensor cores, queries)");
      key_gradients_kernel<HS, F><<<tile_blocks(rows, B, rows.KV), kThreadsPerBlock, key_bytes, stream_of(ctx)>>>(
          dkv, dout, deltas, lse, rows, rows.scale(), accumulate);
      check_launch("flash_attention_backward (tensor cores, keys)");
      release_scratch(ctx, deltas);
    });
  });
}

}  // namespace trident::kernels::cuda
