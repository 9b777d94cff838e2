#include "formats/gguf_reader.h"

#include <limits>

#include "base/error.h"
#include "base/mapped_file.h"
#include "formats/byte_reader.h"
#include "formats/ggml_type_names.h"

namespace rapide {
namespace {

// Arrays of arrays are legal but nothing real nests deeply; the limit keeps a hostile file
// from recursing the parser off its stack.
constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;
// Smallest encodings, used to reject counts that cannot fit in the bytes left.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;            // empty key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim

uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 1;
}

std::string read_string(ByteReader& r, std::string_view what) {
  const uint64_t length = r.read<uint64_t>(what);
  if (length > r.remaining()) {
    fail(ErrorCode::kCorrupt, "'{}': {} at offset {} claims {} bytes but only {} remain", r.file(),
         what, r.offset() - 8, length, r.remaining());
  }
  const uint8_t* p = r.take(length, what);
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(length));
}

// `items_left`: what is left of GgufFile::kMaxMetadataItems for this file's arrays.
GgufValue read_value(ByteReader& r, GgufType type, const std::string& key, int depth,
                     uint64_t& items_left) {
  switch (type) {
    case GgufType::kU8:
      return GgufValue::u8(r.read<uint8_t>(key));
    case GgufType::kI8:
      return GgufValue::i8(r.read<int8_t>(key));
    case GgufType::kU16:
      return GgufValue::u16(r.read<uint16_t>(key));
    case GgufType::kI16:
      return GgufValue::i16(r.read<int16_t>(key));
    case GgufType::kU32:
      return GgufValue::u32(r.read<uint32_t>(key));
    case GgufType::kI32:
      return GgufValue::i32(r.read<int32_t>(key));
    case GgufType::kU64:
      return GgufValue::u64(r.read<uint64_t>(key));
    case GgufType::kI64:
      return GgufValue::i64(r.read<int64_t>(key));
    case GgufType::kF32:
      return GgufValue::f32(r.read<float>(key));
    case GgufType::kF64:
      return GgufValue::f64(r.read<double>(key));
    case GgufType::kBool:
      return GgufValue::boolean(r.read<uint8_t>(key) != 0);
    case GgufType::kString:
      return GgufValue::string(read_string(r, "value of key '" + key + "'"));
    case GgufType::kArray:
      break;
  }
  if (depth >= kMaxArrayDepth) {
    fail(ErrorCode::kCorrupt, "'{}': key '{}' nests arrays deeper than {}", r.file(), key,
         kMaxArrayDepth);
  }
  const uint32_t element_type = r.read<uint32_t>(key);
  if (!is_valid_gguf_type(element_type)) {
    fail(ErrorCode::kCorrupt, "'{}': key '{}' is an array of unknown value type {}", r.file(), key,
         element_type);
  }
  const auto element = static_cast<GgufType>(element_type);
  const uint64_t count = r.read<uint64_t>(key);
  if (count > r.remaining() / min_value_bytes(element)) {
    fail(ErrorCode::kCorrupt,
         "'{}': key '{}' claims {} array items of type {}, more than the {} bytes left", r.file(),
         key, count, gguf_type_name(element), r.remaining());
  }
  // Before reserving: the file's bytes bound the count, but not the memory (~50 bytes per
  // item against 1 in the file).
  if (count > items_left) {
    fail(ErrorCode::kCorrupt,
         "'{}': key '{}' claims {} array items; the file's metadata arrays may hold {} in all",
         r.file(), key, count, GgufFile::kMaxMetadataItems);
  }
  items_left -= count;
  GgufArray array;
  array.element_type = element;
  array.items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i)
    array.items.push_back(read_value(r, element, key, depth + 1, items_left));
  return {GgufType::kArray, std::move(array)};
}

bool is_power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

GgufFile GgufFile::open(const std::string& path) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  return parse(file->data(), file->size(), path, file);
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size, std::string name,
                         std::shared_ptr<const void> owner) {
  GgufFile f;
  f.path_ = std::move(name);
  f.owner_ = std::move(owner);
  f.file_size_ = size;
  const std::string& file = f.path_;
  if (size < 4)
    fail(ErrorCode::kCorrupt, "'{}': {} bytes is too small for a GGUF file", file, size);
  ByteReader r(data, size, file);
  const uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kGgufMagic) {
    fail(ErrorCode::kCorrupt, "'{}': not a GGUF file (magic {:#010x}, expected {:#010x} \"GGUF\")",
         file, magic, kGgufMagic);
  }
  f.version_ = r.read<uint32_t>("version");
  if (f.version_ == 1) {
    fail(ErrorCode::kUnsupported,
         "'{}': GGUF version 1 (32-bit counts, 2023) is not supported; only versions 2 and 3 are "
         "(re-convert the model with a current llama.cpp)",
         file);
  }
  if (f.version_ != 2 && f.version_ != 3) {
    fail(ErrorCode::kUnsupported, "'{}': GGUF version {} is not supported (only 2 and 3){}", file,
         f.version_, (f.version_ & 0xffff) == 0 ? "; the file looks big-endian" : "");
  }
  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("metadata count");
  if (n_kv > r.remaining() / kMinKeyValueBytes) {
    fail(ErrorCode::kCorrupt, "'{}': metadata count {} cannot fit in the {} bytes left", file, n_kv,
         r.remaining());
  }
  if (n_tensors > (r.remaining() - n_kv * kMinKeyValueBytes) / kMinTensorInfoBytes) {
    fail(ErrorCode::kCorrupt, "'{}': tensor count {} cannot fit in the {} bytes left", file,
         n_tensors, r.remaining());
  }

  f.metadata_.reserve(static_cast<size_t>(n_kv));
  uint64_t items_left = kMaxMetadataItems;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = read_string(r, fmt::format("key of metadata entry {}", i));
    const uint32_t type = r.read<uint32_t>(key);
    if (!is_valid_gguf_type(type)) {
      fail(ErrorCode::kCorrupt, "'{}': key '{}' has unknown value type {}", file, key, type);
    }
    GgufValue value = read_value(r, static_cast<GgufType>(type), key, 0, items_left);
    if (!f.key_index_.emplace(key, f.metadata_.size()).second) {
      fail(ErrorCode::kCorrupt, "'{}': duplicate metadata key '{}'", file, key);
    }
    f.metadata_.push_back({std::move(key), std::move(value)});
  }

  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufType::kU32) {
      fail(ErrorCode::kCorrupt, "'{}': general.alignment has type {}, expected u32", file,
           gguf_type_name(a->type));
    }
    const uint64_t alignment = std::get<uint64_t>(a->data);
    if (!is_power_of_two(alignment)) {
      fail(ErrorCode::kCorrupt, "'{}': general.alignment {} is not a power of two", file,
           alignment);
    }
    f.alignment_ = static_cast<uint32_t>(alignment);
  }

  f.tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = read_string(r, fmt::format("name of tensor {}", i));
    if (t.name.empty()) fail(ErrorCode::kCorrupt, "'{}': tensor {} has an empty name", file, i);
    const uint32_t n_dims = r.read<uint32_t>(t.name);
    if (n_dims < 1 || n_dims > kMaxDims) {
      fail(ErrorCode::kCorrupt, "'{}': tensor '{}' has {} dimensions (expected 1 to {})", file,
           t.name, n_dims, kMaxDims);
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = r.read<uint64_t>(t.name);
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(ErrorCode::kCorrupt, "'{}': tensor '{}' dimension {} is {} (must be positive)", file,
             t.name, d, dim);
      }
      if (__builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
        fail(ErrorCode::kCorrupt, "'{}': tensor '{}' element count overflows 64 bits", file,
             t.name);
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint32_t ggml_type = r.read<uint32_t>(t.name);
    if (!is_supported_tensor_type(ggml_type)) {
      fail(ErrorCode::kUnsupported,
           "'{}': tensor '{}' has ggml type {} ({}), which rapide does not support (supported: "
           "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, "
           "iq4_xs)",
           file, t.name, ggml_type_name(ggml_type), ggml_type);
    }
    t.type = static_cast<TensorType>(ggml_type);
    const int64_t block = tensor_type_block_size(t.type);
    if (t.shape[0] % block != 0) {
      fail(ErrorCode::kCorrupt,
           "'{}': tensor '{}' row length {} is not a multiple of the {} block size {}", file,
           t.name, t.shape[0], tensor_type_name(t.type), block);
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(elements / block, tensor_type_block_bytes(t.type), &bytes)) {
      fail(ErrorCode::kCorrupt, "'{}': tensor '{}' byte size overflows 64 bits", file, t.name);
    }
    t.size_bytes = static_cast<size_t>(bytes);
    t.offset = r.read<uint64_t>(t.name);
    if (!f.tensor_index_.emplace(t.name, f.tensors_.size()).second) {
      fail(ErrorCode::kCorrupt, "'{}': duplicate tensor name '{}'", file, t.name);
    }
    f.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment. A vocabulary-only file
  // (no tensors) may end right after its metadata without that padding.
  const uint64_t header_end = r.offset();
  f.data_offset_ = header_end + (f.alignment_ - header_end % f.alignment_) % f.alignment_;
  if (n_tensors == 0) return f;
  if (f.data_offset_ > size) {
    fail(ErrorCode::kCorrupt,
         "'{}': tensor data section would start at {}, past the end of the {}-byte file", file,
         f.data_offset_, size);
  }
  const uint64_t data_size = size - f.data_offset_;
  for (GgufTensorInfo& t : f.tensors_) {
    if (t.offset % f.alignment_ != 0) {
      fail(ErrorCode::kCorrupt, "'{}': tensor '{}' offset {} is not a multiple of the alignment {}",
           file, t.name, t.offset, f.alignment_);
    }
    if (t.offset > data_size || t.size_bytes > data_size - t.offset) {
      fail(ErrorCode::kCorrupt,
           "'{}': tensor '{}' data ({} bytes at data offset {}) runs past the end of the {}-byte "
           "data section (file truncated?)",
           file, t.name, t.size_bytes, t.offset, data_size);
    }
    t.data = data + f.data_offset_ + t.offset;
  }
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(std::string(key));
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue& GgufFile::require(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail(ErrorCode::kNotFound, "'{}': missing metadata key '{}'", path_, key);
  return *v;
}

void GgufFile::type_mismatch(std::string_view key, const GgufValue& v,
                             std::string_view expected) const {
  fail(ErrorCode::kCorrupt, "'{}': metadata key '{}' has type {}, expected {}", path_, key,
       gguf_type_name(v.type), expected);
}

uint64_t GgufFile::unsigned_value(std::string_view key, const GgufValue& v, uint64_t hi) const {
  if (!is_integer_gguf_type(v.type)) type_mismatch(key, v, "an integer");
  if (const auto* s = std::get_if<int64_t>(&v.data)) {
    if (*s < 0 || static_cast<uint64_t>(*s) > hi) {
      fail(ErrorCode::kCorrupt, "'{}': metadata key '{}' value {} is out of range [0, {}]", path_,
           key, *s, hi);
    }
    return static_cast<uint64_t>(*s);
  }
  const uint64_t u = std::get<uint64_t>(v.data);
  if (u > hi) {
    fail(ErrorCode::kCorrupt, "'{}': metadata key '{}' value {} is out of range [0, {}]", path_,
         key, u, hi);
  }
  return u;
}

int64_t GgufFile::integer_value(std::string_view key, const GgufValue& v, int64_t lo,
                                uint64_t hi) const {
  if (!is_integer_gguf_type(v.type)) type_mismatch(key, v, "an integer");
  if (const auto* u = std::get_if<uint64_t>(&v.data)) {
    if (*u > hi) {
      fail(ErrorCode::kCorrupt, "'{}': metadata key '{}' value {} is out of range [{}, {}]", path_,
           key, *u, lo, hi);
    }
    return static_cast<int64_t>(*u);
  }
  const int64_t s = std::get<int64_t>(v.data);
  if (s < lo || (s > 0 && static_cast<uint64_t>(s) > hi)) {
    fail(ErrorCode::kCorrupt, "'{}': metadata key '{}' value {} is out of range [{}, {}]", path_,
         key, s, lo, hi);
  }
  return s;
}

double GgufFile::float_value(std::string_view key, const GgufValue& v) const {
  if (!is_float_gguf_type(v.type)) type_mismatch(key, v, "a float");
  return std::get<double>(v.data);
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  return static_cast<uint32_t>(unsigned_value(key, require(key), UINT32_MAX));
}
int32_t GgufFile::get_i32(std::string_view key) const {
  return static_cast<int32_t>(integer_value(key, require(key), INT32_MIN, INT32_MAX));
}
uint64_t GgufFile::get_u64(std::string_view key) const {
  return unsigned_value(key, require(key), UINT64_MAX);
}
int64_t GgufFile::get_i64(std::string_view key) const {
  return integer_value(key, require(key), INT64_MIN, INT64_MAX);
}
float GgufFile::get_f32(std::string_view key) const {
  return static_cast<float>(float_value(key, require(key)));
}
double GgufFile::get_f64(std::string_view key) const {
  return float_value(key, require(key));
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kBool) type_mismatch(key, v, "bool");
  return std::get<bool>(v.data);
}

const std::string& GgufFile::get_string(std::string_view key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kString) type_mismatch(key, v, "string");
  return v.as_string();
}

const GgufArray& GgufFile::get_array(std::string_view key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kArray) type_mismatch(key, v, "array");
  return v.as_array();
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufArray& a = get_array(key);
  if (a.element_type != GgufType::kString) {
    fail(ErrorCode::kCorrupt, "'{}': metadata key '{}' is an array of {}, expected strings", path_,
         key, gguf_type_name(a.element_type));
  }
  std::vector<std::string> out;
  out.reserve(a.items.size());
  for (const auto& item : a.items) out.push_back(item.as_string());
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufArray& a = get_array(key);
  std::vector<float> out;
  out.reserve(a.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) {
    out.push_back(static_cast<float>(float_value(fmt::format("{}[{}]", key, i), a.items[i])));
  }
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const GgufArray& a = get_array(key);
  std::vector<int32_t> out;
  out.reserve(a.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) {
    out.push_back(static_cast<int32_t>(
        integer_value(fmt::format("{}[{}]", key, i), a.items[i], INT32_MIN, INT32_MAX)));
  }
  return out;
}

uint32_t GgufFile::get_u32_or(std::string_view key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : fallback;
}
float GgufFile::get_f32_or(std::string_view key, float fallback) const {
  return has(key) ? get_f32(key) : fallback;
}
bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::string GgufFile::get_string_or(std::string_view key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

}  // namespace rapide
