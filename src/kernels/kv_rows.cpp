#include "kernels/kv_rows.h"

#include <algorithm>
#include <cstring>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/fp16.h"
#include "formats/tensor_type.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace rapide {

namespace {

uint16_t& scale_at(uint8_t* part, size_t byte) {
  return *reinterpret_cast<uint16_t*>(part + byte);
}
float scale_at(const uint8_t* part, size_t byte) {
  uint16_t h;
  std::memcpy(&h, part + byte, sizeof(h));
  return fp16_to_fp32(h);
}

// The n <= 32 values x as one ggml block of `type`; a short group is quantized as a
// zero-padded block, which gives the same codes and scale.
template <typename Block>
Block quantize_block(TensorType type, const float* x, int n) {
  float padded[kQuantBlock] = {};
  if (n < kQuantBlock) {
    std::copy(x, x + n, padded);
    x = padded;
  }
  Block block;
  quantize_row(type, x, &block, kQuantBlock);
  return block;
}

// One group quantized by Q4_0's rule: codes (with the layout's offset) and the f16 scale.
uint16_t quantize_group_q4_0(const float* x, int n, int* codes) {
  const BlockQ4_0 block = quantize_block<BlockQ4_0>(TensorType::kQ4_0, x, n);
  constexpr int kHalf = kQuantBlock / 2;  // byte j holds elements j (low) and j + 16 (high)
  for (int i = 0; i < n; ++i) codes[i] = i < kHalf ? block.qs[i] & 0x0F : block.qs[i - kHalf] >> 4;
  return block.d;
}

// Q8_0's rule on n_groups groups of `group` values: codes (without the layout's offset), f16
// scales and, unless null, each group's code sum. The scalar twin of
// quantize_q8_groups_avx512.
void quantize_q8_groups_scalar(const float* x, int n_groups, int group, int8_t* q, uint16_t* scales,
                               int32_t* sums) {
  for (int g = 0; g < n_groups; ++g) {
    const BlockQ8_0 block = quantize_block<BlockQ8_0>(TensorType::kQ8_0, x + g * group, group);
    std::memcpy(q + g * group, block.qs, static_cast<size_t>(group));
    scales[g] = block.d;
    if (sums == nullptr) continue;
    sums[g] = 0;
    for (int i = 0; i < group; ++i) sums[g] += block.qs[i];
  }
}

// The twin the kernels' ISA allows (the same bytes either way).
void quantize_q8_groups(const float* x, int n_groups, int group, int8_t* q, uint16_t* scales) {
  if (active_isa_level() >= IsaLevel::kAvx512) {
    return quantize_q8_groups_avx512(x, n_groups, group, q, scales, nullptr);
  }
  quantize_q8_groups_scalar(x, n_groups, group, q, scales, nullptr);
}

// A query's scales and offset sums from its groups' f16 scales and code sums.
void finish_query(const KvLayout& layout, const uint16_t* scales, const int32_t* sums,
                  QuantizedQuery& out) {
  for (int g = 0; g < layout.n_groups(); ++g) {
    out.d[g] = fp16_to_fp32(scales[g]);
    out.offset_sum[g] = layout.code_offset() * sums[g];
  }
}

// A q4_0 code into its nibble; the byte's other nibble is another dimension's.
void put_nibble(uint8_t* part, size_t byte, bool high, int code) {
  if (high) {
    part[byte] = static_cast<uint8_t>((part[byte] & 0x0F) | (code << 4));
  } else {
    part[byte] = static_cast<uint8_t>((part[byte] & 0xF0) | code);
  }
}

}  // namespace

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::kF16:
      return "f16";
    case KvType::kF32:
      return "f32";
    case KvType::kQ8_0:
      return "q8_0";
    case KvType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

KvType parse_kv_type(std::string_view name, std::string_view flag) {
  for (KvType t : {KvType::kF16, KvType::kF32, KvType::kQ8_0, KvType::kQ4_0}) {
    if (name == kv_type_name(t)) return t;
  }
  fail(ErrorCode::kInvalidArgument, "{} must be f16, f32, q8_0 or q4_0, got '{}'", flag, name);
}

void check_kv_layout(const KvLayout& layout) {
  const int multiple = layout.type == KvType::kQ4_0 ? 16 : layout.type == KvType::kQ8_0 ? 4 : 1;
  if (layout.head_dim % multiple != 0) {
    fail(ErrorCode::kInvalidArgument,
         "KV type {} needs a head dimension that is a multiple of {} (the model has {}); use f16",
         kv_type_name(layout.type), multiple, layout.head_dim);
  }
}

void store_kv_row(const KvLayout& layout, uint8_t* part, bool is_value, int slot, const float* x) {
  const int d = layout.head_dim;
  switch (layout.type) {
    case KvType::kF32: {
      auto* out = reinterpret_cast<float*>(part);
      for (int i = 0; i < d; ++i) {
        out[is_value ? layout.value_element(slot, i) : layout.key_element(slot, i)] = x[i];
      }
      return;
    }
    case KvType::kF16: {
      auto* out = reinterpret_cast<uint16_t*>(part);
      if (is_value) {
        to_fp16(x, d, out + layout.value_element(slot, 0));
        return;
      }
      // K is transposed: convert as a row, then scatter down the slot's column.
      uint16_t half[kMaxHeadDim];
      to_fp16(x, d, half);
      for (int i = 0; i < d; ++i) out[layout.key_element(slot, i)] = half[i];
      return;
    }
    case KvType::kQ8_0: {
      // Every group's codes and scale at once (on AVX-512 CPUs by the twin: the same bytes),
      // then each code to its place (kv/kv_store.h): a key's 4 dimensions of a slot are
      // one 4-byte word, block_size words apart; a value's dimensions are bytes 4 apart in
      // its quad. A 32-row decode step writes 64 K/V rows per layer, and the per-element
      // address arithmetic and scalar rounding were 2.5 % of it.
      const int group = layout.group_size();
      const int n_groups = layout.n_groups();
      alignas(64) int8_t q[kMaxHeadDim];
      uint16_t scales[kMaxKvGroups];
      quantize_q8_groups(x, n_groups, group, q, scales);
      for (int g = 0; g < n_groups; ++g) {
        scale_at(part, is_value ? layout.value_scale_byte(slot, g)
                                : layout.key_scale_byte(slot, g)) = scales[g];
      }
      if (is_value) {
        uint8_t* out = part + layout.value_code_byte(slot, 0);
        for (int i = 0; i < d; ++i) out[4 * i] = static_cast<uint8_t>(q[i] ^ 0x80);
      } else {
        uint8_t* out = part + layout.key_code_byte(slot, 0);
        const size_t word_stride = static_cast<size_t>(layout.block_size) * 4;
        for (int w = 0; w < d / 4; ++w) {
          uint32_t word;
          std::memcpy(&word, q + 4 * w, sizeof(word));
          word ^= 0x80808080u;  // code = q + 128
          std::memcpy(out + w * word_stride, &word, sizeof(word));
        }
      }
      return;
    }
    case KvType::kQ4_0: {
      const int group = layout.group_size();
      int codes[kQuantBlock];
      for (int g = 0; g < layout.n_groups(); ++g) {
        const uint16_t scale = quantize_group_q4_0(x + g * group, group, codes);
        scale_at(part, is_value ? layout.value_scale_byte(slot, g)
                                : layout.key_scale_byte(slot, g)) = scale;
        for (int i = 0; i < group; ++i) {
          const int dim = g * group + i;
          if (is_value) {
            put_nibble(part, layout.value_code_byte(slot, dim), layout.value_code_high(dim),
                       codes[i]);
          } else {
            put_nibble(part, layout.key_code_byte(slot, dim), layout.key_code_high(dim), codes[i]);
          }
        }
      }
      return;
    }
  }
}

void load_kv_row(const KvLayout& layout, const uint8_t* part, bool is_value, int slot, float* out) {
  const int d = layout.head_dim;
  for (int i = 0; i < d; ++i) {
    const size_t e = is_value ? layout.value_element(slot, i) : layout.key_element(slot, i);
    switch (layout.type) {
      case KvType::kF32:
        out[i] = reinterpret_cast<const float*>(part)[e];
        break;
      case KvType::kF16:
        out[i] = fp16_to_fp32(reinterpret_cast<const uint16_t*>(part)[e]);
        break;
      case KvType::kQ8_0:
      case KvType::kQ4_0: {
        const int g = i / layout.group_size();
        const float scale = scale_at(
            part, is_value ? layout.value_scale_byte(slot, g) : layout.key_scale_byte(slot, g));
        const int code = is_value ? kv_code(part, layout.value_code_byte(slot, i),
                                            layout.value_code_high(i), layout.type)
                                  : kv_code(part, layout.key_code_byte(slot, i),
                                            layout.key_code_high(i), layout.type);
        out[i] = scale * static_cast<float>(code - layout.code_offset());
        break;
      }
    }
  }
}

void copy_kv_slots(const KvLayout& layout, const uint8_t* from, uint8_t* to, int n_slots) {
  const size_t n = static_cast<size_t>(n_slots);
  const size_t bs = static_cast<size_t>(layout.block_size);
  for (int layer = 0; layer < layout.n_layers; ++layer) {
    for (int head = 0; head < layout.n_kv_heads; ++head) {
      const size_t k = layout.offset(layer, false, head), v = layout.offset(layer, true, head);
      if (!layout.quantized()) {
        const size_t e = layout.element_bytes();
        for (int d = 0; d < layout.head_dim; ++d) {  // K is [dim][slot]: one run per dimension
          const size_t at = k + layout.key_element(0, d) * e;
          std::memcpy(to + at, from + at, n * e);
        }
        std::memcpy(to + v, from + v, n * layout.head_dim * e);
        continue;
      }
      // K codes: one run of 4-byte words per word row.
      const int dims_per_word = layout.type == KvType::kQ4_0 ? 8 : 4;
      for (int w = 0; w < layout.head_dim / dims_per_word; ++w) {
        const size_t at = k + w * bs * 4;
        std::memcpy(to + at, from + at, n * 4);
      }
      // V codes: the whole quads in one run, a last partial quad byte by byte (byte b of a
      // quad belongs to slot b % 4).
      const size_t quad_bytes = layout.code_bytes() / (layout.padded_slots() / 4);
      std::memcpy(to + v, from + v, n / 4 * quad_bytes);
      for (size_t b = n / 4 * quad_bytes; b < (n + 3) / 4 * quad_bytes; ++b) {
        if (b % 4 < n % 4) to[v + b] = from[v + b];
      }
      // Scales of both parts: one run per group.
      for (const size_t part : {k, v}) {
        for (int g = 0; g < layout.n_groups(); ++g) {
          const size_t at = part + layout.key_scale_byte(0, g);
          std::memcpy(to + at, from + at, n * sizeof(uint16_t));
        }
      }
    }
  }
}

void quantize_query(const KvLayout& layout, const float* x, QuantizedQuery& out) {
  uint16_t scales[kMaxKvGroups];
  int32_t sums[kMaxKvGroups];
  quantize_q8_groups_scalar(x, layout.n_groups(), layout.group_size(), out.q, scales, sums);
  finish_query(layout, scales, sums, out);
}

void quantize_query_avx512(const KvLayout& layout, const float* x, QuantizedQuery& out) {
  uint16_t scales[kMaxKvGroups];
  int32_t sums[kMaxKvGroups];
  quantize_q8_groups_avx512(x, layout.n_groups(), layout.group_size(), out.q, scales, sums);
  finish_query(layout, scales, sums, out);
}

}  // namespace rapide
