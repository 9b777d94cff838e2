#include "formats/safetensors_reader.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <limits>
#include <set>

#include "base/error.h"
#include "base/mapped_file.h"
#include "formats/model_json.h"

namespace rapide {
namespace {

constexpr int kMaxDims = 4;

TensorType dtype_from_name(const std::string& file, const std::string& tensor,
                           const std::string& dtype) {
  if (dtype == "F32") return TensorType::kF32;
  if (dtype == "F16") return TensorType::kF16;
  if (dtype == "BF16") return TensorType::kBF16;
  fail(ErrorCode::kUnsupported,
       "'{}': tensor '{}' has dtype {} (only F32, F16 and BF16 are supported)", file, tensor,
       dtype);
}

uint64_t json_u64(const std::string& file, const std::string& tensor, const nlohmann::json& v,
                  const char* what) {
  if (!v.is_number_unsigned()) {
    fail(ErrorCode::kCorrupt, "'{}': tensor '{}' {} is not a non-negative integer", file, tensor,
         what);
  }
  return v.get<uint64_t>();
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  return parse(file->data(), file->size(), path, file);
}

SafetensorsFile SafetensorsFile::parse(const uint8_t* data, size_t size, std::string name,
                                       std::shared_ptr<const void> owner) {
  SafetensorsFile f;
  f.path_ = std::move(name);
  f.owner_ = std::move(owner);
  const std::string& file = f.path_;
  if (size < 8)
    fail(ErrorCode::kCorrupt, "'{}': {} bytes is too small for safetensors", file, size);
  uint64_t header_length;
  std::memcpy(&header_length, data, 8);
  if (header_length > size - 8) {
    fail(ErrorCode::kCorrupt, "'{}': safetensors header length {} exceeds the {}-byte file", file,
         header_length, size);
  }
  const uint8_t* body = data + 8 + header_length;
  const uint64_t body_size = size - 8 - header_length;
  const nlohmann::json header =
      parse_model_json(std::string_view(reinterpret_cast<const char*>(data + 8), header_length),
                       fmt::format("'{}': safetensors header", file));
  if (!header.is_object())
    fail(ErrorCode::kCorrupt, "'{}': safetensors header is not an object", file);

  for (const auto& [tensor, info] : header.items()) {
    if (tensor == "__metadata__") continue;
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets") || !info["dtype"].is_string() || !info["shape"].is_array() ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      fail(ErrorCode::kCorrupt, "'{}': tensor '{}' entry lacks dtype/shape/data_offsets[2]", file,
           tensor);
    }
    SafetensorsTensor t;
    t.name = tensor;
    t.type = dtype_from_name(file, tensor, info["dtype"].get<std::string>());
    const auto& shape = info["shape"];
    if (shape.empty() || shape.size() > kMaxDims) {
      fail(ErrorCode::kCorrupt, "'{}': tensor '{}' has {} dimensions (expected 1 to {})", file,
           tensor, shape.size(), kMaxDims);
    }
    int64_t elements = 1;
    for (const auto& d : shape) {
      const uint64_t dim = json_u64(file, tensor, d, "shape entry");
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
        fail(ErrorCode::kCorrupt, "'{}': tensor '{}' has an empty or overflowing shape", file,
             tensor);
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t begin = json_u64(file, tensor, info["data_offsets"][0], "data_offsets[0]");
    const uint64_t end = json_u64(file, tensor, info["data_offsets"][1], "data_offsets[1]");
    if (begin > end || end > body_size) {
      fail(ErrorCode::kCorrupt,
           "'{}': tensor '{}' data_offsets [{}, {}) are outside the {}-byte data", file, tensor,
           begin, end, body_size);
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(elements, tensor_type_block_bytes(t.type), &bytes) ||
        static_cast<uint64_t>(bytes) != end - begin) {
      fail(ErrorCode::kCorrupt, "'{}': tensor '{}' holds {} bytes but its shape and dtype need {}",
           file, tensor, end - begin, bytes);
    }
    t.data = body + begin;
    t.size_bytes = static_cast<size_t>(bytes);
    f.tensors_.push_back(std::move(t));
  }
  return f;
}

}  // namespace rapide
