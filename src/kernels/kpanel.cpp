// The k-quant panel layout (kernels/kpanel.h): packing, unpacking one row back, and the
// scalar reference kernel every SIMD variant is tested against.
#include "kernels/kpanel.h"

#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "kernels/matmul_internal.h"
#include "kernels/rowquant.h"

namespace rapide::matmul {

namespace {

// Where column `col` (0..255) of row r lives in a block: its nibble byte, whether it is the
// high nibble, and its vector index v = 2g + h within the chunk.
struct KpPlace {
  int nibble_byte;
  bool high_nibble;
  int chunk;
  int v;
  int lane;  // r * 4 + j: the byte of the row's 4 columns in each 64-byte vector
};
KpPlace place(int r, int col) {
  const int cc = col % 32, h = cc / 16, g = (cc % 16) / 4, j = cc % 4;
  return {g * 64 + r * 4 + j, h == 1, col / 32, 2 * g + h, r * 4 + j};
}

}  // namespace

bool is_kpanel_type(TensorType type) {
  return type == TensorType::kQ4_K || type == TensorType::kQ5_K || type == TensorType::kQ6_K;
}

void kpanel_unpack(TensorType type, const uint8_t* block, int r, Unpacked256& u) {
  const KPanelLayout l = kpanel_layout(type);
  const bool six = type == TensorType::kQ6_K;
  std::memcpy(&u.d, block + 2 * r, 2);
  u.dmin = 0;
  if (!six) std::memcpy(&u.dmin, block + kKpDmin + 2 * r, 2);
  for (int j = 0; j < 16; ++j) {
    if (six) {
      u.scale[j] = static_cast<int8_t>(block[kKpScales6 + j * kPanel + r]);
      u.min[j] = 0;
    } else {
      const int k = j / 2;
      u.scale[j] = block[kKpScales + k * kPanel + r];
      u.min[j] = block[kKpMins + (k / 2) * kPanel * 2 + r * 2 + k % 2];
    }
  }
  for (int col = 0; col < kSuperBlock; ++col) {
    const KpPlace p = place(r, col);
    const uint8_t* chunk = block + l.header + p.chunk * l.chunk;
    const uint8_t nib = chunk[p.nibble_byte];
    int w = p.high_nibble ? nib >> 4 : nib & 0x0f;
    if (type == TensorType::kQ5_K) w |= ((chunk[256 + p.lane] >> p.v) & 1) << 4;
    if (six) w = (w | ((chunk[256 + (p.v / 4) * 64 + p.lane] >> (2 * (p.v % 4))) & 3) << 4) - 32;
    u.w[col] = static_cast<int8_t>(w);
  }
}

void kpanel_pack(TensorType type, const uint8_t* rows, int64_t row_bytes, int n_rows, int64_t b,
                 uint8_t* block) {
  const KPanelLayout l = kpanel_layout(type);
  const bool six = type == TensorType::kQ6_K;
  const int64_t block_bytes = tensor_type_block_bytes(type);
  std::memset(block, 0, static_cast<size_t>(l.block()));
  Unpacked256 u;
  for (int r = 0; r < n_rows; ++r) {
    unpack256(type, rows + r * row_bytes + b * block_bytes, u);
    std::memcpy(block + 2 * r, &u.d, 2);
    if (!six) std::memcpy(block + kKpDmin + 2 * r, &u.dmin, 2);
    for (int j = 0; j < 16; ++j) {
      if (six) {
        block[kKpScales6 + j * kPanel + r] = static_cast<uint8_t>(u.scale[j]);
      } else if (j % 2 == 0) {  // Q4_K / Q5_K: one scale and min per 32 weights
        const int k = j / 2;
        block[kKpScales + k * kPanel + r] = static_cast<uint8_t>(u.scale[j]);
        block[kKpMins + (k / 2) * kPanel * 2 + r * 2 + k % 2] = static_cast<uint8_t>(u.min[j]);
      }
    }
    for (int col = 0; col < kSuperBlock; ++col) {
      const KpPlace p = place(r, col);
      uint8_t* chunk = block + l.header + p.chunk * l.chunk;
      const int w = six ? u.w[col] + 32 : u.w[col];  // unsigned: 0..15, 0..31 or 0..63
      chunk[p.nibble_byte] |= static_cast<uint8_t>(p.high_nibble ? (w & 0x0f) << 4 : w & 0x0f);
      if (type == TensorType::kQ5_K) {
        chunk[256 + p.lane] |= static_cast<uint8_t>(((w >> 4) & 1) << p.v);
      } else if (six) {
        chunk[256 + (p.v / 4) * 64 + p.lane] |= static_cast<uint8_t>((w >> 4) << (2 * (p.v % 4)));
      }
    }
  }
}

namespace scalar {

void kpanel(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
            int64_t t1, float* y) {
  const int64_t block_bytes = kpanel_layout(w.type).block();
  const int64_t blocks = w.cols / kSuperBlock;
  Unpacked256 u;
  for (int64_t p = p0; p < p1; ++p) {
    const int rows = static_cast<int>(std::min<int64_t>(kPanel, w.rows - p * kPanel));
    for (int64_t t = t0; t < t1; ++t) {
      for (int r = 0; r < rows; ++r) {
        float acc = 0.0f, accm = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          kpanel_unpack(w.type, w.panel(p) + b * block_bytes, r, u);
          int32_t isum, msum;
          unpacked256_sums(u, a.q + t * a.stride + b * kSuperBlock, a.bsums + (t * blocks + b) * 16,
                           isum, msum);
          kquant_combine(a.d[t * blocks + b], u.d, u.dmin, isum, msum, acc, accm);
        }
        y[t * w.rows + p * kPanel + r] = acc - accm;
      }
    }
  }
}

}  // namespace scalar

}  // namespace rapide::matmul
