// Blocks of the row-wise types unpacked into plain integers, in llama.cpp's element order
// (its dequantize_row_* functions): the single definition of each bit layout, shared by
// the dequantizer and the scalar dot products. A weight is
//   (d * scale[e / 16]) * w[e] - (dmin * min[e / 16])        (k-quants, 256 weights)
//   d * w[e] + m                                             (32-weight types)
#pragma once

#include <cstdint>
#include <cstring>

#include "formats/quant_blocks.h"

namespace rapide::matmul {

struct Unpacked256 {
  int8_t w[256];
  int16_t scale[16];  // per 16 weights
  int16_t min[16];    // per 16 weights; zero for types without mins
  uint16_t d, dmin;   // f16 bits; dmin 0 without mins
};

inline void unpack_q2_k(const uint8_t* p, Unpacked256& u) {
  BlockQ2K b;
  std::memcpy(&b, p, sizeof(b));
  u.d = b.d;
  u.dmin = b.dmin;
  for (int j = 0; j < 16; ++j) {
    u.scale[j] = b.scales[j] & 0xf;
    u.min[j] = b.scales[j] >> 4;
  }
  // Each 32 bytes of qs hold 128 weights: bits 2k..2k+1 of byte l are weight 32k + l.
  for (int n = 0; n < 2; ++n) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        u.w[128 * n + 32 * k + l] = static_cast<int8_t>((b.qs[32 * n + l] >> (2 * k)) & 3);
      }
    }
  }
}

inline void unpack_q3_k(const uint8_t* p, Unpacked256& u) {
  BlockQ3K b;
  std::memcpy(&b, p, sizeof(b));
  u.d = b.d;
  u.dmin = 0;
  int8_t sc[16];
  q3k_scales(b.scales, sc);
  for (int j = 0; j < 16; ++j) {
    u.scale[j] = static_cast<int16_t>(sc[j] - 32);
    u.min[j] = 0;
  }
  // As Q2_K for the low bits; bit (4n + k) of hmask[l] is the high bit of weight
  // 128n + 32k + l, and a clear high bit means "minus 4".
  for (int n = 0; n < 2; ++n) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * n + l] >> (2 * k)) & 3;
        const bool high = (b.hmask[l] >> (4 * n + k)) & 1;
        u.w[128 * n + 32 * k + l] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
    }
  }
}

// Q4_K and Q5_K: 64 weights per 32 bytes of qs (low nibbles first, then high nibbles);
// Q5_K's 5th bit of weight 64k + 32h + l is bit 2k + h of qh[l].
inline void unpack_q45_k(const uint8_t* p, bool five, Unpacked256& u) {
  uint16_t d, dmin;
  std::memcpy(&d, p, 2);
  std::memcpy(&dmin, p + 2, 2);
  const uint8_t* scales = p + 4;
  const uint8_t* qh = five ? p + 16 : nullptr;
  const uint8_t* qs = five ? p + 48 : p + 16;
  u.d = d;
  u.dmin = dmin;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    kquant_scale_min(j, scales, &sc, &m);
    u.scale[2 * j] = u.scale[2 * j + 1] = static_cast<int16_t>(sc);
    u.min[2 * j] = u.min[2 * j + 1] = static_cast<int16_t>(m);
  }
  for (int k = 0; k < 4; ++k) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = qs[32 * k + l];
      int lo = byte & 0xf, hi = byte >> 4;
      if (five) {
        lo |= ((qh[l] >> (2 * k)) & 1) << 4;
        hi |= ((qh[l] >> (2 * k + 1)) & 1) << 4;
      }
      u.w[64 * k + l] = static_cast<int8_t>(lo);
      u.w[64 * k + 32 + l] = static_cast<int8_t>(hi);
    }
  }
}

// Q6_K: per 128 weights, 64 bytes of ql and 32 of qh. Weight 128n + 32k + l has its low
// nibble in ql[64n + l + 32 (k & 1)] (low nibble for k < 2, high for k >= 2) and its top two
// bits at bits 2k..2k+1 of qh[32n + l]; stored value minus 32.
inline void unpack_q6_k(const uint8_t* p, Unpacked256& u) {
  BlockQ6K b;
  std::memcpy(&b, p, sizeof(b));
  u.d = b.d;
  u.dmin = 0;
  for (int j = 0; j < 16; ++j) {
    u.scale[j] = b.scales[j];
    u.min[j] = 0;
  }
  for (int n = 0; n < 2; ++n) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lbyte = b.ql[64 * n + l + 32 * (k & 1)];
        const int low = k < 2 ? (lbyte & 0xf) : (lbyte >> 4);
        const int high = (b.qh[32 * n + l] >> (2 * k)) & 3;
        u.w[128 * n + 32 * k + l] = static_cast<int8_t>((low | (high << 4)) - 32);
      }
    }
  }
}

inline void unpack_iq4_xs(const uint8_t* p, Unpacked256& u) {
  BlockIq4Xs b;
  std::memcpy(&b, p, sizeof(b));
  u.d = b.d;
  u.dmin = 0;
  for (int ib = 0; ib < 8; ++ib) {
    u.scale[2 * ib] = u.scale[2 * ib + 1] = static_cast<int16_t>(iq4xs_scale(b, ib) - 32);
    u.min[2 * ib] = u.min[2 * ib + 1] = 0;
    for (int j = 0; j < 16; ++j) {
      u.w[32 * ib + j] = kIq4nlValues[b.qs[16 * ib + j] & 0xf];
      u.w[32 * ib + 16 + j] = kIq4nlValues[b.qs[16 * ib + j] >> 4];
    }
  }
}

inline void unpack256(TensorType type, const uint8_t* p, Unpacked256& u) {
  switch (type) {
    case TensorType::kQ2_K:
      return unpack_q2_k(p, u);
    case TensorType::kQ3_K:
      return unpack_q3_k(p, u);
    case TensorType::kQ4_K:
      return unpack_q45_k(p, false, u);
    case TensorType::kQ5_K:
      return unpack_q45_k(p, true, u);
    case TensorType::kQ6_K:
      return unpack_q6_k(p, u);
    default:
      return unpack_iq4_xs(p, u);
  }
}

// The integer part of one unpacked super-block's dot product with Q8_K activations q (256)
// and bsums (16): isum = sum of scale * (w . q) per 16 weights, msum = sum of min * bsum.
inline void unpacked256_sums(const Unpacked256& u, const int8_t* q, const int16_t* bsums,
                             int32_t& isum, int32_t& msum) {
  isum = 0;
  msum = 0;
  for (int j = 0; j < 16; ++j) {
    int32_t s = 0;
    for (int l = 0; l < 16; ++l) s += u.w[16 * j + l] * q[16 * j + l];
    isum += u.scale[j] * s;
    msum += u.min[j] * bsums[j];
  }
}

// One unpacked super-block to 256 floats (dequantize_row).
inline void unpacked256_to_f32(const Unpacked256& u, float d, float dmin, float* o) {
  for (int j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(u.scale[j]);
    const float ml = dmin * static_cast<float>(u.min[j]);
    for (int l = 0; l < 16; ++l) o[16 * j + l] = dl * static_cast<float>(u.w[16 * j + l]) - ml;
  }
}

struct Unpacked32 {
  int8_t w[32];
  uint16_t d, m;  // f16 bits; m only for Q4_1 / Q5_1
};

// Q4_1/Q5_0/Q5_1/IQ4_NL: byte j of qs holds weight j (low nibble) and j + 16 (high); for the
// 5-bit types bit j of qh is the 5th bit of weight j.
inline void unpack32(TensorType type, const uint8_t* p, Unpacked32& u) {
  const bool has_m = type == TensorType::kQ4_1 || type == TensorType::kQ5_1;
  const bool five = type == TensorType::kQ5_0 || type == TensorType::kQ5_1;
  std::memcpy(&u.d, p, 2);
  u.m = 0;
  if (has_m) std::memcpy(&u.m, p + 2, 2);
  uint32_t qh = 0;
  if (five) std::memcpy(&qh, p + (has_m ? 4 : 2), 4);
  const uint8_t* qs = p + (has_m ? 4 : 2) + (five ? 4 : 0);
  for (int j = 0; j < 16; ++j) {
    int lo = qs[j] & 0xf, hi = qs[j] >> 4;
    if (type == TensorType::kIQ4_NL) {
      lo = kIq4nlValues[lo];
      hi = kIq4nlValues[hi];
    } else if (five) {
      lo |= ((qh >> j) & 1) << 4;
      hi |= ((qh >> (j + 16)) & 1) << 4;
      if (type == TensorType::kQ5_0) {
        lo -= 16;
        hi -= 16;
      }
    }
    u.w[j] = static_cast<int8_t>(lo);
    u.w[j + 16] = static_cast<int8_t>(hi);
  }
}

}  // namespace rapide::matmul
