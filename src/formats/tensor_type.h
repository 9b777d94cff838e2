// Tensor element types, numbered as GGUF's ggml_type so file values map directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "formats/quant_blocks.h"

namespace rapide {

enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

// Block layouts as in llama.cpp (ggml-common.h):
//   Q8_0: 32 weights per block = f16 scale d, then 32 int8 q;   w = d * q
//   Q4_0: 32 weights per block = f16 scale d, then 16 bytes; byte j holds weight j in its low
//         nibble and weight j+16 in its high nibble;            w = d * (nibble - 8)
constexpr int kQuantBlock = 32;
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQuantBlock];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

// ggml's spelling: "f32", "q8_0", "q4_K", "iq4_xs", ...; lookups ignore case.
std::string_view tensor_type_name(TensorType type);
std::optional<TensorType> tensor_type_from_name(std::string_view name);
// Whether rapide can compute with this GGUF type id (others are rejected with a clear error).
bool is_supported_tensor_type(uint32_t ggml_type);
// F32, F16 and BF16: the types that hold each weight as a float (no blocks, no scales).
constexpr bool is_float_type(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
}
// Every type rapide reads, in a fixed order (name lookups, tests).
inline constexpr TensorType kAllTensorTypes[] = {
    TensorType::kF32,  TensorType::kF16,  TensorType::kBF16, TensorType::kQ8_0,
    TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1,
    TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K,
    TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS};
// Elements per block (1 for float types, 32 or 256 for quantized ones) and bytes per block.
int64_t tensor_type_block_size(TensorType type);
int64_t tensor_type_block_bytes(TensorType type);
// Bytes of a row of n elements; n must be a multiple of the block size.
int64_t tensor_row_bytes(TensorType type, int64_t n);

}  // namespace rapide
