// How the operations of kernels/ops.inc read their sizes off their tensors (the convention stated
// there), written once for the checks of kernels/dispatch.cpp and for the backends, which unwrap
// the tensors into their kernels on pointers (kernels/common/unwrap.inc). Host code only.
#pragma once

#include <cstdint>

#include "kernels/kernels.hpp"

namespace trident::kernels {

// A tensor as a matrix (rows, cols): cols its last dimension, rows the product of the others
// (1 for a vector; an empty shape is (0, 0)).
inline int64_t matrix_rows(const Tensor& t) {
  if (t.shape.rank == 0) return 0;
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.shape.rank; ++d) rows *= t.shape.dims[d];
  return rows;
}
inline int64_t matrix_cols(const Tensor& t) { return t.shape.rank == 0 ? 0 : t.shape.dims[t.shape.rank - 1]; }

// A tensor as a batch of matrices (batch, rows, cols): rows and cols its last two dimensions,
// batch the product of the others (1 for a matrix). Rank 2 or more (kernels::batched_matmul
// checks).
struct MatrixBatch {
  int64_t batch = 0, rows = 0, cols = 0;
};
inline MatrixBatch matrix_batch(const Tensor& t) {
  if (t.shape.rank < 2) return {};
  int64_t batch = 1;
  for (int d = 0; d + 2 < t.shape.rank; ++d) batch *= t.shape.dims[d];
  return {batch, t.shape.dims[t.shape.rank - 2], t.shape.dims[t.shape.rank - 1]};
}

// batched_matmul's sizes: c (batch, M, N), and K from a, stored (M, K) or, transposed, (K, M).
struct BatchedSizes {
  int batch, M, N, K;
};
inline BatchedSizes batched_sizes(const Tensor& c, const Tensor& a, bool transpose_a) {
  const MatrixBatch cm = matrix_batch(c), am = matrix_batch(a);
  return {static_cast<int>(cm.batch), static_cast<int>(cm.rows), static_cast<int>(cm.cols),
          static_cast<int>(transpose_a ? am.rows : am.cols)};
}

// The (B, T, C) dimensions of a rank-3 activation (0 where the rank is less: the dimensions a
// Shape does not have are 0).
struct Sequence {
  int B, T, C;
};
inline Sequence sequence(const Tensor& t) {
  return {static_cast<int>(t.shape.dims[0]), static_cast<int>(t.shape.dims[1]), static_cast<int>(t.shape.dims[2])};
}
// Attention's (B, T, C) from qkv (B, T, 3C).
inline Sequence attention_sequence(const Tensor& qkv) {
  const Sequence s = sequence(qkv);
  return {s.B, s.T, s.C / 3};
}

// The elements a strided operand spans: its last element's offset + 1 (0 when it has none).
inline int64_t strided_extent(int batch, int heads, int rows, int cols, const Strides& s) {
  if (batch == 0 || heads == 0 || rows == 0 || cols == 0) return 0;
  return (batch - 1) * s.batch + (heads - 1) * s.head + (rows - 1) * s.row + (cols - 1) * s.col + 1;
}

// An optional buffer's elements as T, or null where it is empty (ops.inc: "or empty").
template <class T>
T* optional_data(const Tensor& t) {
  return t.data == nullptr ? nullptr : t.as<T>();
}

}  // namespace trident::kernels
