// AVX-512 (VNNI) dot products of the row-wise types: the k-quants Q2_K..Q6_K and IQ4_XS
// have SIMD kernels (kernels/rowquant_kquant_simd.h, bit-identical to the scalar
// reference); Q4_1, Q5_0, Q5_1 and IQ4_NL run their scalar kernel at this level.
#include "kernels/rowquant_kquant_simd.h"

namespace rapide::matmul::avx512 {

RowDot row_dot(TensorType type) {
  const RowDot simd = kquant_row_dot(type);
  return simd != nullptr ? simd : scalar::row_dot(type);
}

RowDotTokens row_dot_tokens(TensorType type) {
  return kquant_row_dot_tokens(type);
}

}  // namespace rapide::matmul::avx512
