// AVX-512 (VNNI) dot products of the row-wise types: Q4_K and Q6_K (the Q4_K_M pair) have SIMD
// kernels (kernels/rowquant_kquant_simd.h, bit-identical to the scalar reference); the
// other row-wise types run their scalar kernel at this level.
#include "kernels/rowquant_kquant_simd.h"

namespace rapide::matmul::avx512 {

RowDot row_dot(TensorType type) {
  switch (type) {
    case TensorType::kQ4_K:
      return q4_k_dot;
    case TensorType::kQ6_K:
      return q6_k_dot;
    default:
      return scalar::row_dot(type);
  }
}

RowDotTokens row_dot_tokens(TensorType type) {
  switch (type) {
    case TensorType::kQ4_K:
      return q4_k_tokens<kRowTokens>;
    case TensorType::kQ6_K:
      return q6_k_tokens<kRowTokens>;
    default:
      return nullptr;
  }
}

}  // namespace rapide::matmul::avx512
