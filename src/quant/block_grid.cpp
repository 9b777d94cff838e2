#include "quant/block_grid.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/fp16.h"
#include "formats/quant_blocks.h"

namespace rapide::quant {
namespace {

constexpr int kBlock = 32;

// The code range and the level of code 0 for the uniform types.
struct Uniform {
  int lo, hi, zero;  // codes [lo, hi], level = code - zero
  bool with_min;
};

Uniform uniform(TensorType type) {
  switch (type) {
    case TensorType::kQ4_0:
      return {0, 15, 8, false};
    case TensorType::kQ5_0:
      return {0, 31, 16, false};
    case TensorType::kQ8_0:
      return {1, 255, 128, false};
    case TensorType::kQ4_1:
      return {0, 15, 0, true};
    case TensorType::kQ5_1:
      return {0, 31, 0, true};
    default:
      return {0, 0, 0, false};
  }
}

// The 5-bit types keep the fifth bits of the 32 codes in qh, low half then high half.
void pack_nibbles(const int* codes, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((codes[j] & 0xf) | ((codes[j + 16] & 0xf) << 4));
    high |= static_cast<uint32_t>((codes[j] >> 4) & 1) << j;
    high |= static_cast<uint32_t>((codes[j + 16] >> 4) & 1) << (j + 16);
  }
  if (qh != nullptr) std::memcpy(qh, &high, 4);
}

// The nibble-coded blocks: d, m when the type has one, qh when it has fifth bits.
template <typename Block>
void pack_nibble_block(const BlockGrid& g, const int* codes, uint8_t* out) {
  Block b;
  b.d = g.d16;
  if constexpr (requires { b.m; }) b.m = g.m16;
  if constexpr (requires { b.qh; }) {
    pack_nibbles(codes, b.qs, b.qh);
  } else {
    pack_nibbles(codes, b.qs, nullptr);
  }
  std::memcpy(out, &b, sizeof(b));
}

}  // namespace

bool has_block_grid(TensorType type) {
  return type == TensorType::kIQ4_NL || uniform(type).hi > 0;
}

int BlockGrid::codes() const {
  return type == TensorType::kIQ4_NL ? 16 : uniform(type).hi + 1;
}

float BlockGrid::value(int code) const {
  if (type == TensorType::kIQ4_NL) return d * static_cast<float>(kIq4nlValues[code]);
  return d * static_cast<float>(code - uniform(type).zero) + m;
}

int BlockGrid::nearest(float v) const {
  if (type == TensorType::kIQ4_NL) {
    const float t = d != 0.0f ? v / d : 0.0f;
    int best = 0;
    for (int i = 1; i < 16; ++i) {
      if (std::fabs(kIq4nlValues[i] - t) < std::fabs(kIq4nlValues[best] - t)) best = i;
    }
    return best;
  }
  const Uniform u = uniform(type);
  if (d == 0.0f) return std::clamp(u.zero, u.lo, u.hi);
  const int code = static_cast<int>(std::nearbyintf((v - m) / d)) + u.zero;
  return std::clamp(code, u.lo, u.hi);
}

BlockGrid make_block_grid(TensorType type, const float* x, float scale_factor) {
  if (!has_block_grid(type)) {
    fail(ErrorCode::kUnsupported, "no block grid for tensor type {}", tensor_type_name(type));
  }
  BlockGrid g;
  g.type = type;
  const Uniform u = uniform(type);
  if (u.with_min) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < kBlock; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    g.d16 = fp32_to_fp16((hi - lo) / static_cast<float>(u.hi) * scale_factor);
    g.m16 = fp32_to_fp16(lo);
  } else {
    // The signed value of largest magnitude sits at the most negative level, as the
    // round-to-nearest quantizers do (Q8_0 is symmetric: amax at 127).
    float amax = 0.0f, extreme = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    }
    float d = 0.0f;
    if (type == TensorType::kQ8_0) {
      d = amax / 127.0f;
    } else if (type == TensorType::kIQ4_NL) {
      d = extreme / static_cast<float>(kIq4nlValues[0]);
    } else {
      d = extreme / static_cast<float>(u.lo - u.zero);
    }
    g.d16 = fp32_to_fp16(d * scale_factor);
  }
  g.d = fp16_to_fp32(g.d16);
  g.m = fp16_to_fp32(g.m16);
  return g;
}

void pack_block(const BlockGrid& g, const int* codes, uint8_t* out) {
  switch (g.type) {
    case TensorType::kQ8_0: {
      BlockQ8_0 b;
      b.d = g.d16;
      for (int j = 0; j < kBlock; ++j) b.qs[j] = static_cast<int8_t>(codes[j] - 128);
      std::memcpy(out, &b, sizeof(b));
      return;
    }
    case TensorType::kQ4_0:
    case TensorType::kIQ4_NL:  // same layout: f16 d, 16 bytes of nibble pairs
      return pack_nibble_block<BlockQ4_0>(g, codes, out);
    case TensorType::kQ4_1:
      return pack_nibble_block<BlockQ4_1>(g, codes, out);
    case TensorType::kQ5_0:
      return pack_nibble_block<BlockQ5_0>(g, codes, out);
    case TensorType::kQ5_1:
      return pack_nibble_block<BlockQ5_1>(g, codes, out);
    default:
      fail(ErrorCode::kUnsupported, "no block grid for tensor type {}", tensor_type_name(g.type));
  }
}

BlockGrid search_block_grid(TensorType type, const float* x, const float* weight, int* codes) {
  constexpr int kSteps = 10;
  constexpr float kStep = 0.02f;
  BlockGrid best = make_block_grid(type, x);
  for (int j = 0; j < kBlock; ++j) codes[j] = best.nearest(x[j]);
  if (weight == nullptr) return best;
  double best_err = DBL_MAX;
  int trial[kBlock];
  for (int s = -kSteps; s <= kSteps; ++s) {
    const BlockGrid g = make_block_grid(type, x, 1.0f + kStep * static_cast<float>(s));
    double err = 0.0;
    for (int j = 0; j < kBlock; ++j) {
      trial[j] = g.nearest(x[j]);
      const double e = x[j] - g.value(trial[j]);
      err += weight[j] * e * e;
    }
    if (err < best_err) {
      best_err = err;
      best = g;
      std::copy(trial, trial + kBlock, codes);
    }
  }
  return best;
}

void quantize_row_weighted(TensorType type, const float* x, const float* weights, uint8_t* out,
                           int64_t n) {
  const int64_t bytes = tensor_type_block_bytes(type);
  int codes[kBlock];
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const BlockGrid g = search_block_grid(
        type, x + b * kBlock, weights != nullptr ? weights + b * kBlock : nullptr, codes);
    pack_block(g, codes, out + b * bytes);
  }
}

}  // namespace rapide::quant
