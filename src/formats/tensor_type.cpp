#include "formats/tensor_type.h"

#include "base/error.h"

namespace rapide {

std::string_view tensor_type_name(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return "f32";
    case TensorType::kF16:
      return "f16";
    case TensorType::kBF16:
      return "bf16";
    case TensorType::kQ8_0:
      return "q8_0";
    case TensorType::kQ4_0:
      return "q4_0";
  }
  return "unknown";
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0,
                       TensorType::kQ4_0}) {
    if (tensor_type_name(t) == name) return t;
  }
  return std::nullopt;
}

bool is_supported_tensor_type(uint32_t ggml_type) {
  return ggml_type == 0 || ggml_type == 1 || ggml_type == 2 || ggml_type == 8 || ggml_type == 30;
}

int64_t tensor_type_block_size(TensorType type) {
  return (type == TensorType::kQ8_0 || type == TensorType::kQ4_0) ? kQuantBlock : 1;
}

int64_t tensor_type_block_bytes(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return 4;
    case TensorType::kF16:
      return 2;
    case TensorType::kBF16:
      return 2;
    case TensorType::kQ8_0:
      return sizeof(BlockQ8_0);
    case TensorType::kQ4_0:
      return sizeof(BlockQ4_0);
  }
  return 0;
}

int64_t tensor_row_bytes(TensorType type, int64_t n) {
  const int64_t block = tensor_type_block_size(type);
  if (n % block != 0) {
    fail(ErrorCode::kInvalidArgument,
         "row of {} elements is not a multiple of the {} block size {}", n, tensor_type_name(type),
         block);
  }
  return n / block * tensor_type_block_bytes(type);
}

}  // namespace rapide
