// GGUF block layouts of the quantized types beyond Q8_0/Q4_0, byte for byte as llama.cpp
// stores them (ggml-common.h), so a file from llama-quantize is read in place.
//
// Every struct is the on-disk block; its size is asserted because a one-byte slip would
// silently shift every later block of a row. f16 fields are raw IEEE half bits.
//
// 32-weight blocks ("legacy" types, w = weight):
//   Q4_1:   d, m (f16); qs[16]: byte j = col j (low nibble), col j+16 (high)   w = d*q + m
//   Q5_0:   d (f16); qh (32 bits: bit j = 5th bit of col j); qs[16] as Q4_1     w = d*(q - 16)
//   Q5_1:   d, m (f16); qh; qs[16]                                               w = d*q + m
//   IQ4_NL: d (f16); qs[16] as Q4_1, each nibble indexes kIq4nlValues           w = d*kv[q]
// 256-weight super-blocks ("k-quants"):
//   Q2_K: scales[16] (low nibble: scale, high: min, of each 16 weights), qs[64] (2 bits),
//         d, dmin (f16)                                      w = d*sc*q - dmin*m
//   Q3_K: hmask[32] (3rd bit), qs[64] (low 2 bits), scales[12] (16 6-bit scales, packed),
//         d (f16)                                            w = d*(sc-32)*(q - (hbit ? 0 : 4))
//   Q4_K: d, dmin (f16), scales[12] (8 6-bit scales and 8 6-bit mins of each 32 weights),
//         qs[128] (nibbles)                                  w = d*sc*q - dmin*m
//   Q5_K: as Q4_K plus qh[32] (5th bit)                      w = d*sc*q - dmin*m
//   Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8, each 16 weights),
//         d (f16)                                            w = d*sc*(q - 32)
//   IQ4_XS: d (f16), scales_h (16 bits: 2 high bits per 32 weights), scales_l[4] (4 low
//         bits per 32 weights), qs[128] (nibbles into kIq4nlValues)  w = d*(ls-32)*kv[q]
// The bit order inside qs/qh/scales is documented with each type's dequantizer
// (kernels/rowquant_dequantize.cpp): it is llama.cpp's dequantize_row_* order.
#pragma once

#include <cstdint>

namespace rapide {

constexpr int kSuperBlock = 256;  // QK_K

struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ2K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
struct BlockQ3K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockQ2K) == 84);
static_assert(sizeof(BlockQ3K) == 110);
static_assert(sizeof(BlockQ4K) == 144);
static_assert(sizeof(BlockQ5K) == 176);
static_assert(sizeof(BlockQ6K) == 210);
static_assert(sizeof(BlockIq4Xs) == 136);

// The 16 non-uniform levels of IQ4_NL and IQ4_XS (kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block: bytes 0-3 hold the
// scales of 0-3 (low 6 bits), 4-7 their mins, 8-11 the low nibbles of scale/min 4-7 whose
// top two bits sit in the spare top bits of bytes 0-7 (llama.cpp's get_scale_min_k4).
inline void kquant_scale_min(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The 16 Q3_K scales (still offset by 32): 12 bytes hold 16 low nibbles in bytes 0-7 and
// 16 2-bit high parts in bytes 8-11.
inline void q3k_scales(const uint8_t* packed, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0xf) : (packed[j - 8] >> 4);
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>(low | (high << 4));
  }
}

// The 6-bit (offset by 32) scale of 32-weight sub-block ib of an IQ4_XS block.
inline int iq4xs_scale(const BlockIq4Xs& b, int ib) {
  return ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b.scales_h >> (2 * ib)) & 3) << 4);
}

}  // namespace rapide
