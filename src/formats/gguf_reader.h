// Reader of GGUF v2/v3 files (https://github.com/ggerganov/ggml/blob/master/docs/gguf.md).
//
// The whole file is validated when it is opened, before anything is used: magic, version,
// counts against the file size, every string/array length, tensor ranks, dimensions and
// their products, tensor types, the alignment and each tensor's byte range. A truncated or
// corrupt file throws Error(kCorrupt) naming the file and what is wrong; tensor data is
// never copied (views into the memory mapping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/gguf_value.h"
#include "formats/tensor_type.h"

namespace rapide {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kGgufDefaultAlignment = 32;

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<int64_t> shape;     // ggml order: shape[0] is the contiguous row length
  uint64_t offset = 0;            // relative to the start of the data section
  const uint8_t* data = nullptr;  // points into the file's bytes
  size_t size_bytes = 0;
};

class GgufFile {
 public:
  // The items of all metadata arrays together (each becomes a GgufValue of ~50 bytes, so this
  // bounds metadata memory near 200 MiB). Real files hold < 1.5M: three vocabulary-sized
  // arrays (tokens, scores, types) of 262k at most, and the merges.
  static constexpr uint64_t kMaxMetadataItems = uint64_t{1} << 22;

  // Maps and validates the file. Throws kNotFound if it cannot be opened.
  static GgufFile open(const std::string& path);
  // Validates bytes already in memory; `owner` keeps them alive (may be null when the caller
  // guarantees their lifetime, e.g. a fuzzer). `name` appears in error messages.
  static GgufFile parse(const uint8_t* data, size_t size, std::string name,
                        std::shared_ptr<const void> owner = nullptr);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  uint64_t file_size() const { return file_size_; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Metadata in file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;  // nullptr if absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors. Missing keys throw kNotFound; a value of another type throws kCorrupt
  // naming the key and both types. Integer getters accept any integer width whose value
  // fits the requested type (writers disagree on widths, e.g. u32 vs u64 counts); float
  // getters accept f32 and f64.
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const GgufArray& get_array(std::string_view key) const;
  // Arrays whose items convert as the scalar getters do (errors name the item index).
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;

  // The same with a default when the key is absent (a present key of the wrong type still
  // throws).
  uint32_t get_u32_or(std::string_view key, uint32_t fallback) const;
  float get_f32_or(std::string_view key, float fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::string get_string_or(std::string_view key, const std::string& fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  const GgufValue& require(std::string_view key) const;
  int64_t integer_value(std::string_view key, const GgufValue& v, int64_t lo, uint64_t hi) const;
  uint64_t unsigned_value(std::string_view key, const GgufValue& v, uint64_t hi) const;
  double float_value(std::string_view key, const GgufValue& v) const;
  [[noreturn]] void type_mismatch(std::string_view key, const GgufValue& v,
                                  std::string_view expected) const;

  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  uint64_t file_size_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  std::shared_ptr<const void> owner_;
};

}  // namespace rapide
