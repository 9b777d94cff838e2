// How attention reaches cached keys and values: fixed-size blocks of token positions,
// found through a per-sequence block table (PagedAttention). A contiguous cache is the
// special case of one big block per sequence, so both layouts run the same attention code.
//
// Memory of one block (all layers, so a block can be exported/imported with one copy):
//   for layer in 0..L-1:  K[kv_head][head_dim][slot]  then  V[kv_head][slot][head_dim]
// K is stored transposed (one row per head dimension, one column per position): attention
// then scores a whole tile of positions with vector FMAs and no horizontal sums, while V
// keeps a row per position because the weighted sum walks positions. Elements are f16
// (default) or f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/model_config.h"

namespace rapide {

enum class KvType { kF16, kF32 };

struct KvLayout {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // token positions per block
  KvType type = KvType::kF16;

  static KvLayout for_model(const ModelConfig& config, int block_size, KvType type) {
    return KvLayout{config.n_layers, config.n_kv_heads, config.head_dim, block_size, type};
  }
  size_t element_bytes() const { return type == KvType::kF16 ? 2 : 4; }
  // Elements of K (or V) for one layer of one block.
  size_t layer_part_elements() const {
    return static_cast<size_t>(n_kv_heads) * block_size * head_dim;
  }
  size_t block_bytes() const { return 2 * n_layers * layer_part_elements() * element_bytes(); }
  // Byte offset, inside a block, of the K (is_value = false) or V part of (layer, head).
  size_t offset(int layer, bool is_value, int kv_head) const {
    size_t part = static_cast<size_t>(layer) * 2 + (is_value ? 1 : 0);
    return (part * layer_part_elements() + static_cast<size_t>(kv_head) * block_size * head_dim) *
           element_bytes();
  }
  // Element index, inside a (layer, head) part, of dimension d of the key at `slot`.
  size_t key_element(int slot, int d) const {
    return static_cast<size_t>(d) * block_size + static_cast<size_t>(slot);
  }
  // Element index, inside a (layer, head) part, of dimension d of the value at `slot`.
  size_t value_element(int slot, int d) const {
    return static_cast<size_t>(slot) * head_dim + static_cast<size_t>(d);
  }
};

class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual const KvLayout& layout() const = 0;
  // Blocks of sequence `seq_id` in position order. Before a forward pass the caller makes
  // sure they cover every position the batch writes for that sequence.
  virtual std::span<const int32_t> block_table(int32_t seq_id) const = 0;
  // Start of block `block` (block_bytes() long).
  virtual uint8_t* block_data(int32_t block) = 0;
};

}  // namespace rapide
