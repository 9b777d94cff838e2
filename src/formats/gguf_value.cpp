#include "formats/gguf_value.h"

#include <fmt/format.h>

#include "base/error.h"

namespace rapide {

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "invalid";
}

bool is_valid_gguf_type(uint32_t type) {
  return type <= static_cast<uint32_t>(GgufType::kF64);
}

bool is_integer_gguf_type(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

bool is_float_gguf_type(GgufType type) {
  return type == GgufType::kF32 || type == GgufType::kF64;
}

GgufValue GgufValue::array(GgufType element_type, std::vector<GgufValue> items) {
  for (const auto& item : items) {
    if (item.type != element_type) {
      fail(ErrorCode::kInvalidArgument, "GGUF array of {} given an item of type {}",
           gguf_type_name(element_type), gguf_type_name(item.type));
    }
  }
  return {GgufType::kArray, GgufArray{element_type, std::move(items)}};
}

GgufValue GgufValue::string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (const auto& s : items) values.push_back(string(s));
  return {GgufType::kArray, GgufArray{GgufType::kString, std::move(values)}};
}

GgufValue GgufValue::f32_array(const std::vector<float>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (float f : items) values.push_back(f32(f));
  return {GgufType::kArray, GgufArray{GgufType::kF32, std::move(values)}};
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (int32_t v : items) values.push_back(i32(v));
  return {GgufType::kArray, GgufArray{GgufType::kI32, std::move(values)}};
}

namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (++n > 200) {
      out += "...";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string GgufValue::to_string(size_t max_items) const {
  switch (type) {
    case GgufType::kString:
      return quote(as_string());
    case GgufType::kBool:
      return std::get<bool>(data) ? "true" : "false";
    case GgufType::kF32:
    case GgufType::kF64:
      return fmt::format("{:g}", std::get<double>(data));
    case GgufType::kArray: {
      const GgufArray& a = as_array();
      std::string out = fmt::format("[{} x {}: ", a.items.size(), gguf_type_name(a.element_type));
      for (size_t i = 0; i < a.items.size() && i < max_items; ++i) {
        if (i) out += ", ";
        out += a.items[i].to_string(max_items);
      }
      if (a.items.size() > max_items) out += ", ...";
      return out + "]";
    }
    default:
      if (std::holds_alternative<uint64_t>(data))
        return fmt::format("{}", std::get<uint64_t>(data));
      return fmt::format("{}", std::get<int64_t>(data));
  }
}

}  // namespace rapide
