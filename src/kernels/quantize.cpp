// Row conversions between f32 and the storage types, bit-exact with llama.cpp's reference
// quantizers (quantize_row_q8_0_ref / quantize_row_q4_0_ref in ggml-quants.c) so files that
// rapide writes hold the same bytes llama.cpp would write from the same floats.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "base/fp16.h"
#include "kernels/matmul.h"
#include "kernels/rowquant.h"

namespace rapide {

namespace {

void check_length(TensorType type, int64_t n) {
  const int64_t block = tensor_type_block_size(type);
  if (n < 0 || n % block != 0) {
    fail(ErrorCode::kInvalidArgument,
         "row of {} elements is not a multiple of the {} block size {}", n, tensor_type_name(type),
         block);
  }
}

// std::roundf (halves away from zero) of a code, |v| <= 127. x86 has no instruction for
// this rounding, so roundf was a library call per element, and with fmaxf the larger part of
// a block's cost: the KV cache quantizes every new position's K and V (a 32-row decode step
// of synth100m with a Q8_0 cache spent 11 % of its time there). The fraction v - trunc(v) is
// exact in float, so the comparison decides exactly as roundf. A NaN (a block holding inf
// or NaN) gives 0, the int8 that roundf's NaN became through x86's integer indefinite,
// without the undefined conversion.
//
// Branch-free: the fraction's sign and size are random per element, and the branches it
// took mispredicted about half the time (a 32-row decode step with a Q8_0 cache spent 14 % of
// its time in this loop at ~30 cycles per element); selects and compares also let the
// compiler vectorise the block's loop.
inline int round_half_away(float v) {
  // Non-finite and out-of-range values become 0 by masking their bits (a select written
  // with ?: stays a branch and keeps the loop scalar).
  const uint32_t keep = 0u - static_cast<uint32_t>(std::fabs(v) < 2147483648.0f);
  const float finite = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & keep);
  const int t = static_cast<int>(finite);
  const float frac = finite - static_cast<float>(t);
  return t + static_cast<int>(frac >= 0.5f) - static_cast<int>(frac <= -0.5f);
}

void quantize_q8_0(const float* in, BlockQ8_0* out, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = in + b * kQuantBlock;
    // fmax's rule (a NaN never wins) by comparison, which the compiler keeps inline. Eight
    // running maxima, merged by the same rule at the end: the values are non-negative or
    // NaN, so the result is the same in any order, and eight short chains of selects
    // replace one 32 long.
    static_assert(kQuantBlock % 8 == 0);
    float part[8] = {};
    for (int j = 0; j < kQuantBlock; j += 8) {
      for (int k = 0; k < 8; ++k) {
        const float a = std::fabs(x[j + k]);
        part[k] = part[k] < a ? a : part[k];
      }
    }
    float amax = 0.0f;
    for (int k = 0; k < 8; ++k) amax = amax < part[k] ? part[k] : amax;
    const float d = amax / 127.0f;
    // llama.cpp multiplies by the reciprocal rather than dividing; keep that for identical bytes.
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQuantBlock; ++j) {
      out[b].qs[j] = static_cast<int8_t>(round_half_away(x[j] * id));
    }
  }
}

void quantize_q4_0(const float* in, BlockQ4_0* out, int64_t blocks) {
  constexpr int kHalf = kQuantBlock / 2;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = in + b * kQuantBlock;
    // The signed value of largest magnitude maps to -8, so the full range [-8, 7] is used
    // on the side where the extreme lies.
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = static_cast<int8_t>(x[j] * id + 8.5f);
      const int hi = static_cast<int8_t>(x[j + kHalf] * id + 8.5f);
      const uint8_t q0 = static_cast<uint8_t>(lo < 15 ? lo : 15);
      const uint8_t q1 = static_cast<uint8_t>(hi < 15 ? hi : 15);
      out[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace

void quantize_row(TensorType type, const float* in, void* out, int64_t n) {
  check_length(type, n);
  switch (type) {
    case TensorType::kF32:
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16: {
      auto* o = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_fp16(in[i]);
      return;
    }
    case TensorType::kBF16: {
      auto* o = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_bf16(in[i]);
      return;
    }
    case TensorType::kQ8_0:
      quantize_q8_0(in, static_cast<BlockQ8_0*>(out), n / kQuantBlock);
      return;
    case TensorType::kQ4_0:
      quantize_q4_0(in, static_cast<BlockQ4_0*>(out), n / kQuantBlock);
      return;
    default:
      return matmul::quantize_row_blocks(type, in, out, n);
  }
  fail(ErrorCode::kUnsupported, "cannot quantize to tensor type {}", static_cast<uint32_t>(type));
}

void dequantize_row(TensorType type, const void* in, float* out, int64_t n) {
  check_length(type, n);
  switch (type) {
    case TensorType::kF32:
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16: {
      const auto* h = static_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
      return;
    }
    case TensorType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_fp32(h[i]);
      return;
    }
    case TensorType::kQ8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(in);
      for (int64_t b = 0; b < n / kQuantBlock; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < kQuantBlock; ++j) out[b * kQuantBlock + j] = d * blocks[b].qs[j];
      }
      return;
    }
    case TensorType::kQ4_0: {
      const auto* blocks = static_cast<const BlockQ4_0*>(in);
      constexpr int kHalf = kQuantBlock / 2;
      for (int64_t b = 0; b < n / kQuantBlock; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        float* o = out + b * kQuantBlock;
        for (int j = 0; j < kHalf; ++j) {
          o[j] = d * ((blocks[b].qs[j] & 0x0f) - 8);
          o[j + kHalf] = d * ((blocks[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    default:
      return matmul::dequantize_row_blocks(type, in, out, n);
  }
  fail(ErrorCode::kUnsupported, "cannot dequantize tensor type {}", static_cast<uint32_t>(type));
}

}  // namespace rapide
