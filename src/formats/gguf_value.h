// GGUF metadata values: every type of the GGUF spec, arrays (also nested) included.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace rapide {

// Value type ids as stored in the file (gguf_type in the GGUF spec).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

std::string_view gguf_type_name(GgufType type);  // "u32", "string", "array", ...
bool is_valid_gguf_type(uint32_t type);
bool is_integer_gguf_type(GgufType type);
bool is_float_gguf_type(GgufType type);

struct GgufValue;

struct GgufArray {
  GgufType element_type = GgufType::kU8;
  std::vector<GgufValue> items;
};

// One metadata value. Integers are held widened (unsigned in `uint64_t`, signed in
// `int64_t`), floats in `double`; `type` remembers the width the file used, so a value
// written back keeps its exact type.
struct GgufValue {
  GgufType type = GgufType::kU8;
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> data;

  static GgufValue u8(uint8_t v) { return {GgufType::kU8, uint64_t{v}}; }
  static GgufValue i8(int8_t v) { return {GgufType::kI8, int64_t{v}}; }
  static GgufValue u16(uint16_t v) { return {GgufType::kU16, uint64_t{v}}; }
  static GgufValue i16(int16_t v) { return {GgufType::kI16, int64_t{v}}; }
  static GgufValue u32(uint32_t v) { return {GgufType::kU32, uint64_t{v}}; }
  static GgufValue i32(int32_t v) { return {GgufType::kI32, int64_t{v}}; }
  static GgufValue u64(uint64_t v) { return {GgufType::kU64, v}; }
  static GgufValue i64(int64_t v) { return {GgufType::kI64, v}; }
  static GgufValue f32(float v) { return {GgufType::kF32, double{v}}; }
  static GgufValue f64(double v) { return {GgufType::kF64, v}; }
  static GgufValue boolean(bool v) { return {GgufType::kBool, v}; }
  static GgufValue string(std::string v) { return {GgufType::kString, std::move(v)}; }
  // An array whose items must all have `element_type`.
  static GgufValue array(GgufType element_type, std::vector<GgufValue> items);
  static GgufValue string_array(const std::vector<std::string>& items);
  static GgufValue f32_array(const std::vector<float>& items);
  static GgufValue i32_array(const std::vector<int32_t>& items);

  bool is_array() const { return type == GgufType::kArray; }
  const GgufArray& as_array() const { return std::get<GgufArray>(data); }
  const std::string& as_string() const { return std::get<std::string>(data); }

  // Human-readable rendering; long arrays and strings are shortened to `max_items` items
  // / a few hundred characters (inspect output).
  std::string to_string(size_t max_items = 8) const;
};

}  // namespace rapide
