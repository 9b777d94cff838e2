// How attention reaches cached keys and values: fixed-size blocks of token positions,
// found through a per-sequence block table (PagedAttention). A contiguous cache is the
// special case of one big block per sequence, so both layouts run the same attention code.
//
// Memory of one block (all layers, so a block can be exported/imported with one copy):
//   for layer in 0..L-1:  K part of each kv_head, then V part of each kv_head
// every part (one layer, K or V, one head) part_bytes() long.
//
// f16 (default) / f32: K[head_dim][slot], V[slot][head_dim]. K is stored transposed (one row
// per head dimension, one column per position): attention then scores a whole tile of
// positions with vector FMAs and no horizontal sums, while V keeps a row per position
// because the weighted sum walks positions.
//
// q8_0 / q4_0 (ggml's formulas): groups of group_size() = 32 dimensions (16, 8 or 4 when 32
// does not divide head_dim) per position, each with its own f16 scale d:
//   value = d * (code - code_offset()), codes unsigned: q8_0 code = q + 128 (q in -127..127),
//   q4_0 code = q in 0..15 with offset 8.
//   K codes: [head_dim / 4][slot][4 bytes] (q4_0: [head_dim / 8][slot][4 bytes], the low
//     nibbles dims 8i..8i+3, the high nibbles dims 8i+4..8i+7), then scales [group][slot].
//     VNNI's vpdpbusd sums the products of 4 adjacent bytes into one 32-bit lane: with four
//     dimensions of a position side by side, one 64-byte load is 16 positions x 4 dims and
//     one vpdpbusd advances 16 scores, again with no horizontal sums (the transposed f16
//     layout's property, for integers). Unsigned codes against the signed int8 query are
//     exactly vpdpbusd's operand types; the offset comes back as offset * sum(query codes).
//   V codes: quads of 4 positions interleaved per dimension, [slot / 4][head_dim][slot % 4]
//     (q4_0: [slot / 4][head_dim / 16][8][slot % 4], byte k of a 16-dim chunk holding dim k in
//     its low nibble and dim k + 8 in its high nibble), then scales [group][slot] as for K.
//     The P·V sum runs over positions: with four positions of a dimension side by side, one
//     vpdpbusd multiplies 4 quantized probabilities (kernels/attention_value_weights.h) with
//     the 4 positions' codes of 16 dimensions and sums them, so P·V is integer like Q·K.
//     block_size is padded to a multiple of 4 in the code bytes.
//   Why 32-dim groups and not one scale per position and head: key vectors have outlier
//   channels, and one scale per row would spend q4_0's 16 levels on them; the price is one
//   int->float conversion and FMA per 32 dims of a tile, an eighth of the integer work.
// q8_0 takes 34 bytes per 32 values (1.88x the positions of f16), q4_0 18 (3.56x).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/model_config.h"

namespace rapide {

// Values are stored in files (offload headers) and identities: append, never renumber.
enum class KvType { kF16 = 0, kF32 = 1, kQ8_0 = 2, kQ4_0 = 3 };

constexpr bool kv_type_quantized(KvType type) {
  return type == KvType::kQ8_0 || type == KvType::kQ4_0;
}

struct KvLayout {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // token positions per block
  KvType type = KvType::kF16;

  // Multi-head latent attention (deepseek2, config.mla()) caches one latent row per position
  // and layer instead of per-head K and V: [norm(kv_c) (kv_lora_rank) ; rotated k_pe
  // (mla_rope_dim)] as the single KV head (model/mla_attention.h). The row is stored as K and
  // again as V: K's part is transposed (one row per dimension), V's keeps a row per
  // position, so the two layouts cannot share one copy.
  static KvLayout for_model(const ModelConfig& config, int block_size, KvType type) {
    if (config.mla()) {
      return KvLayout{config.n_layers, 1, config.kv_lora_rank + config.mla_rope_dim, block_size,
                      type};
    }
    return KvLayout{config.n_layers, config.n_kv_heads, config.head_dim, block_size, type};
  }
  bool quantized() const { return kv_type_quantized(type); }
  // f16 / f32 only: bytes of one element.
  size_t element_bytes() const { return type == KvType::kF16 ? 2 : 4; }
  // Elements of K (or V) for one layer of one block.
  size_t layer_part_elements() const {
    return static_cast<size_t>(n_kv_heads) * block_size * head_dim;
  }
  // Quantized types: dimensions per scale, and scales per position and head.
  // 32 (ggml's block) when it divides head_dim, else the largest of 16, 8, 4 that does: a
  // group never exceeds a block and always fills whole vectors of the kernels that run.
  int group_size() const {
    for (int g : {32, 16, 8}) {
      if (head_dim % g == 0) return g;
    }
    return 4;
  }
  int n_groups() const { return head_dim / group_size(); }
  int code_offset() const { return type == KvType::kQ8_0 ? 128 : 8; }
  // Slots rounded up to whole quads of 4 (the quantized V layout interleaves quads).
  int padded_slots() const { return (block_size + 3) / 4 * 4; }
  // Bytes of the codes of one part (what precedes its scales).
  size_t code_bytes() const {
    const size_t values = static_cast<size_t>(padded_slots()) * head_dim;
    return type == KvType::kQ4_0 ? values / 2 : values;
  }
  // Bytes of one (layer, K or V, head) part.
  size_t part_bytes() const {
    if (!quantized()) return static_cast<size_t>(block_size) * head_dim * element_bytes();
    return code_bytes() + static_cast<size_t>(block_size) * n_groups() * sizeof(uint16_t);
  }
  size_t block_bytes() const {
    return 2 * static_cast<size_t>(n_layers) * n_kv_heads * part_bytes();
  }
  // Byte offset, inside a block, of the K (is_value = false) or V part of (layer, head).
  size_t offset(int layer, bool is_value, int kv_head) const {
    size_t part = static_cast<size_t>(layer) * 2 + (is_value ? 1 : 0);
    return (part * n_kv_heads + static_cast<size_t>(kv_head)) * part_bytes();
  }
  // f16 / f32: element index, inside a part, of dimension d of the key at `slot`.
  size_t key_element(int slot, int d) const {
    return static_cast<size_t>(d) * block_size + static_cast<size_t>(slot);
  }
  // f16 / f32: element index, inside a part, of dimension d of the value at `slot`.
  size_t value_element(int slot, int d) const {
    return static_cast<size_t>(slot) * head_dim + static_cast<size_t>(d);
  }
  // Quantized: byte of a part holding the code of dimension d of the key at `slot`, and
  // whether it is that byte's high nibble (q4_0).
  size_t key_code_byte(int slot, int d) const {
    const int per_word = type == KvType::kQ4_0 ? 8 : 4;  // dims in one slot's 4 bytes
    return (static_cast<size_t>(d / per_word) * block_size + slot) * 4 + d % 4;
  }
  bool key_code_high(int d) const { return type == KvType::kQ4_0 && d % 8 >= 4; }
  size_t value_code_byte(int slot, int d) const {
    const size_t quad = static_cast<size_t>(slot / 4), lane = static_cast<size_t>(slot % 4);
    if (type != KvType::kQ4_0) return (quad * head_dim + d) * 4 + lane;
    return (quad * (head_dim / 2) + static_cast<size_t>(d / 16) * 8 + d % 8) * 4 + lane;
  }
  bool value_code_high(int d) const { return type == KvType::kQ4_0 && d % 16 >= 8; }
  // Quantized: byte offset, inside a part, of the f16 scale of group g at `slot`.
  size_t key_scale_byte(int slot, int g) const {
    return code_bytes() + (static_cast<size_t>(g) * block_size + slot) * sizeof(uint16_t);
  }
  size_t value_scale_byte(int slot, int g) const { return key_scale_byte(slot, g); }
};

// The code stored at `byte` of a quantized part (its high nibble when `high`, for q4_0).
inline int kv_code(const uint8_t* part, size_t byte, bool high, KvType type) {
  if (type != KvType::kQ4_0) return part[byte];
  return high ? part[byte] >> 4 : part[byte] & 0x0F;
}

// A block-table entry whose block was freed (outside every layer's sliding window).
constexpr int32_t kFreedBlock = -1;

class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual const KvLayout& layout() const = 0;
  // Blocks of sequence `seq_id` in position order. Before a forward pass the caller makes
  // sure they cover every position the batch writes for that sequence. Leading entries may
  // be kFreedBlock when every layer has a sliding window: blocks that no query of the
  // sequence reads any more (first_block_read, kernels/attention_value_weights.h).
  virtual std::span<const int32_t> block_table(int32_t seq_id) const = 0;
  // Start of block `block` (block_bytes() long).
  virtual uint8_t* block_data(int32_t block) = 0;
};

}  // namespace rapide
