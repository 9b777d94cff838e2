// Reader of safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then the
// tensor bytes. Offsets and sizes are validated against the file before any view is made.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/tensor_type.h"

namespace rapide {

struct SafetensorsTensor {
  std::string name;  // as stored (Hugging Face names)
  TensorType type = TensorType::kF32;
  std::vector<int64_t> shape;  // as stored: row-major, shape[0] is the outermost dimension
  const uint8_t* data = nullptr;
  size_t size_bytes = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates. kCorrupt for a malformed header or out-of-range offsets,
  // kUnsupported for dtypes other than F32/F16/BF16.
  static SafetensorsFile open(const std::string& path);
  static SafetensorsFile parse(const uint8_t* data, size_t size, std::string name,
                               std::shared_ptr<const void> owner = nullptr);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  std::string path_;
  std::vector<SafetensorsTensor> tensors_;
  std::shared_ptr<const void> owner_;
};

}  // namespace rapide
