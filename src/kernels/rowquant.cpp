// The row-wise types' activation conversions, scalar dot products (the reference every
// SIMD twin is tested against) and dequantizer.
#include "kernels/rowquant.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/rowquant_unpack.h"

namespace rapide::matmul {

bool is_row_type(TensorType type) {
  switch (type) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kIQ4_NL:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

RowAct row_activation(TensorType type) {
  switch (type) {
    case TensorType::kQ5_0:
    case TensorType::kIQ4_NL:
      return RowAct::kQ8_0;
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
      return RowAct::kQ8_1;
    default:
      return RowAct::kQ8_K;
  }
}

void quantize_q8_1(const float* x, int64_t cols, int8_t* q, float* d, float* s) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float dd = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int v = static_cast<int>(std::nearbyintf(xb[j] * id));
      q[b * 32 + j] = static_cast<int8_t>(v);
      sum += v;
    }
    d[b] = fp16_to_fp32(fp32_to_fp16(dd));
    // The sum uses the unrounded scale, as llama.cpp's x86 quantize_row_q8_1 does.
    s[b] = fp16_to_fp32(fp32_to_fp16(dd * static_cast<float>(sum)));
  }
}

void quantize_q8_k(const float* x, int64_t cols, int8_t* q, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < cols / kSuperBlock; ++b) {
    const float* xb = x + b * kSuperBlock;
    int8_t* qb = q + b * kSuperBlock;
    // The signed value of largest magnitude (the first one on ties) maps to -127 or 127.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kSuperBlock; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qb, 0, kSuperBlock);
      std::memset(bsums + b * 16, 0, 16 * sizeof(int16_t));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kSuperBlock; ++j) {
      const int v = static_cast<int>(std::nearbyintf(iscale * xb[j]));
      qb[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += qb[16 * j + i];
      bsums[b * 16 + j] = static_cast<int16_t>(sum);
    }
    d[b] = 1.0f / iscale;
  }
}

namespace scalar {
namespace {

template <TensorType kType>
float dot256(const uint8_t* row, int64_t blocks, const ActRow& x) {
  constexpr int64_t kBytes =
      static_cast<int64_t>(kType == TensorType::kQ2_K   ? sizeof(BlockQ2K)
                           : kType == TensorType::kQ3_K ? sizeof(BlockQ3K)
                           : kType == TensorType::kQ4_K ? sizeof(BlockQ4K)
                           : kType == TensorType::kQ5_K ? sizeof(BlockQ5K)
                           : kType == TensorType::kQ6_K ? sizeof(BlockQ6K)
                                                        : sizeof(BlockIq4Xs));
  float acc = 0.0f, accm = 0.0f;
  Unpacked256 u;
  for (int64_t i = 0; i < blocks; ++i) {
    unpack256(kType, row + i * kBytes, u);
    int32_t isum, msum;
    unpacked256_sums(u, x.q + i * kSuperBlock, x.bsums + i * 16, isum, msum);
    kquant_combine(x.d[i], u.d, u.dmin, isum, msum, acc, accm);
  }
  return acc - accm;
}

// 32-weight blocks against Q8_0 (s unused) or Q8_1: acc += (dw * da) * sum(w q), and for
// the types with a minimum, summs += m * s (llama.cpp's vec_dot_q4_1_q8_1 and kin).
template <TensorType kType>
float dot32(const uint8_t* row, int64_t blocks, const ActRow& x) {
  constexpr int64_t kBytes =
      static_cast<int64_t>(kType == TensorType::kQ4_1   ? sizeof(BlockQ4_1)
                           : kType == TensorType::kQ5_0 ? sizeof(BlockQ5_0)
                           : kType == TensorType::kQ5_1 ? sizeof(BlockQ5_1)
                                                        : sizeof(BlockIq4Nl));
  constexpr bool kHasMin = kType == TensorType::kQ4_1 || kType == TensorType::kQ5_1;
  float acc = 0.0f, summs = 0.0f;
  Unpacked32 u;
  for (int64_t i = 0; i < blocks; ++i) {
    unpack32(kType, row + i * kBytes, u);
    const int8_t* q = x.q + i * 32;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += u.w[j] * q[j];
    acc = std::fmaf(fp16_to_fp32(u.d) * x.d[i], static_cast<float>(sum), acc);
    if (kHasMin) summs = std::fmaf(fp16_to_fp32(u.m), x.s[i], summs);
  }
  return acc + summs;
}

}  // namespace

RowDot row_dot(TensorType type) {
  switch (type) {
    case TensorType::kQ4_1:
      return dot32<TensorType::kQ4_1>;
    case TensorType::kQ5_0:
      return dot32<TensorType::kQ5_0>;
    case TensorType::kQ5_1:
      return dot32<TensorType::kQ5_1>;
    case TensorType::kIQ4_NL:
      return dot32<TensorType::kIQ4_NL>;
    case TensorType::kQ2_K:
      return dot256<TensorType::kQ2_K>;
    case TensorType::kQ3_K:
      return dot256<TensorType::kQ3_K>;
    case TensorType::kQ4_K:
      return dot256<TensorType::kQ4_K>;
    case TensorType::kQ5_K:
      return dot256<TensorType::kQ5_K>;
    case TensorType::kQ6_K:
      return dot256<TensorType::kQ6_K>;
    case TensorType::kIQ4_XS:
      return dot256<TensorType::kIQ4_XS>;
    default:
      return nullptr;
  }
}

RowDotTokens row_dot_tokens(TensorType) {
  return nullptr;
}
RowDotRows row_dot_rows(TensorType) {
  return nullptr;
}

}  // namespace scalar

void dequantize_row_blocks(TensorType type, const void* in, float* out, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(in);
  const int64_t block = tensor_type_block_size(type);
  const int64_t bytes = tensor_type_block_bytes(type);
  if (block == kSuperBlock) {
    Unpacked256 u;
    for (int64_t b = 0; b < n / block; ++b) {
      unpack256(type, p + b * bytes, u);
      unpacked256_to_f32(u, fp16_to_fp32(u.d), fp16_to_fp32(u.dmin), out + b * block);
    }
    return;
  }
  Unpacked32 u;
  for (int64_t b = 0; b < n / block; ++b) {
    unpack32(type, p + b * bytes, u);
    const float d = fp16_to_fp32(u.d), m = fp16_to_fp32(u.m);
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<float>(u.w[j]) * d + m;
  }
}

}  // namespace rapide::matmul
