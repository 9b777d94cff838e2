// AVX2 dot products of the row-wise types: the k-quants Q2_K..Q6_K and IQ4_XS
// (kernels/rowquant_kquant_simd.h) and the 32-weight Q4_1, Q5_0, Q5_1 and IQ4_NL
// (kernels/rowquant_block32_simd.h), all bit-identical to the scalar reference.
#include "kernels/rowquant_block32_simd.h"
#include "kernels/rowquant_kquant_simd.h"

namespace rapide::matmul::avx2 {

RowDot row_dot(TensorType type) {
  if (const RowDot simd = kquant_row_dot(type)) return simd;
  if (const RowDot simd = block32_row_dot(type)) return simd;
  return scalar::row_dot(type);
}

RowDotTokens row_dot_tokens(TensorType type) {
  return kquant_row_dot_tokens(type);
}

RowDotRows row_dot_rows(TensorType type) {
  return kquant_row_dot_rows(type);
}

}  // namespace rapide::matmul::avx2
