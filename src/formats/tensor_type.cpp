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
    case TensorType::kQ4_1:
      return "q4_1";
    case TensorType::kQ5_0:
      return "q5_0";
    case TensorType::kQ5_1:
      return "q5_1";
    case TensorType::kQ2_K:
      return "q2_K";
    case TensorType::kQ3_K:
      return "q3_K";
    case TensorType::kQ4_K:
      return "q4_K";
    case TensorType::kQ5_K:
      return "q5_K";
    case TensorType::kQ6_K:
      return "q6_K";
    case TensorType::kIQ4_NL:
      return "iq4_nl";
    case TensorType::kIQ4_XS:
      return "iq4_xs";
  }
  return "unknown";
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  // Case-insensitive: "q4_k", "Q4_K" and ggml's own "q4_K" all name Q4_K.
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (TensorType t : kAllTensorTypes) {
    const std::string_view n = tensor_type_name(t);
    bool same = n.size() == name.size();
    for (size_t i = 0; same && i < n.size(); ++i) same = lower(n[i]) == lower(name[i]);
    if (same) return t;
  }
  return std::nullopt;
}

bool is_supported_tensor_type(uint32_t ggml_type) {
  for (TensorType t : kAllTensorTypes) {
    if (static_cast<uint32_t>(t) == ggml_type) return true;
  }
  return false;
}

int64_t tensor_type_block_size(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
      return 1;
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kIQ4_NL:
      return kQuantBlock;
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_XS:
      return kSuperBlock;
  }
  return 1;
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
    case TensorType::kQ4_1:
      return sizeof(BlockQ4_1);
    case TensorType::kQ5_0:
      return sizeof(BlockQ5_0);
    case TensorType::kQ5_1:
      return sizeof(BlockQ5_1);
    case TensorType::kQ2_K:
      return sizeof(BlockQ2K);
    case TensorType::kQ3_K:
      return sizeof(BlockQ3K);
    case TensorType::kQ4_K:
      return sizeof(BlockQ4K);
    case TensorType::kQ5_K:
      return sizeof(BlockQ5K);
    case TensorType::kQ6_K:
      return sizeof(BlockQ6K);
    case TensorType::kIQ4_NL:
      return sizeof(BlockIq4Nl);
    case TensorType::kIQ4_XS:
      return sizeof(BlockIq4Xs);
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
