// Reading and writing one position's K/V in a KvStore block part, for every KvType
// (kv/kv_store.h defines the byte layouts), and the query side of quantized attention.
//
// Quantized types use ggml's Q8_0 / Q4_0 rules (quantize_row in kernels/matmul.h, so the
// values equal what llama.cpp's quantized KV cache would hold) applied to each group of
// group_size() dimensions; a group shorter than 32 is quantized as a zero-padded block,
// which gives the same codes and scale.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/attention.h"
#include "kv/kv_store.h"

namespace rapide {

// "f16", "f32", "q8_0", "q4_0".
const char* kv_type_name(KvType type);
// The inverse; an unknown name fails with kInvalidArgument naming `flag` and the choices.
KvType parse_kv_type(std::string_view name, std::string_view flag = "--kv-type");
// Fails with kInvalidArgument when the layout's head dimension does not fit its type's
// packing (q8_0: a multiple of 4; q4_0: of 16). Every KV store checks its layout.
void check_kv_layout(const KvLayout& layout);

// Stores the head_dim values `x` as the key (is_value = false) or value at `slot` of `part`.
void store_kv_row(const KvLayout& layout, uint8_t* part, bool is_value, int slot, const float* x);

// The stored key/value at `slot` of `part` back as floats (dequantized).
void load_kv_row(const KvLayout& layout, const uint8_t* part, bool is_value, int slot, float* out);

// Copies positions [0, n_slots) of every part of block `from` to block `to` (the rest of
// `to` is left as it is).
void copy_kv_slots(const KvLayout& layout, const uint8_t* from, uint8_t* to, int n_slots);

// A query quantized for integer dot products with quantized keys: int8 codes per group of
// the layout's group_size() with scale d (Q8_0's rule), and per group code_offset() times the
// sum of its codes, which the unsigned key codes' offset adds to every integer dot product.
constexpr int kMaxKvGroups = kMaxHeadDim / 4;
struct QuantizedQuery {
  alignas(64) int8_t q[kMaxHeadDim];
  float d[kMaxKvGroups];
  int32_t offset_sum[kMaxKvGroups];
};
void quantize_query(const KvLayout& layout, const float* x, QuantizedQuery& out);
// The same bytes on AVX-512 (F16C and AVX-512 BW: the caller checks the CPU).
void quantize_query_avx512(const KvLayout& layout, const float* x, QuantizedQuery& out);
// Q8_0's rule (quantize_row) on n_groups groups of `group` <= 32 values (a short group as a
// zero-padded block) on AVX-512: codes, f16 scales and, unless null, each group's code sum.
void quantize_q8_groups_avx512(const float* x, int n_groups, int group, int8_t* codes,
                               uint16_t* scales, int32_t* sums);

}  // namespace rapide
