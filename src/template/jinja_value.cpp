#include "template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace rapide::jinja {

const Value* ValueDict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const Value* CallArgs::find(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value CallArgs::get(size_t index, std::string_view name, const Value& fallback) const {
  const Value* v = find(index, name);
  return v ? *v : fallback;
}

Value Value::undefined(std::string message) {
  Value v;
  v.string_ = std::make_shared<const std::string>(std::move(message));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), int_(b ? 1 : 0) {}
Value::Value(int64_t v) : kind_(Kind::kInt), int_(v) {}
Value::Value(double v) : kind_(Kind::kFloat), float_(v) {}
Value::Value(std::string s)
    : kind_(Kind::kString), string_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(ValueList list)
    : kind_(Kind::kList), list_(std::make_shared<const ValueList>(std::move(list))) {}
Value::Value(ValueDict dict)
    : kind_(Kind::kDict), dict_(std::make_shared<ValueDict>(std::move(dict))) {}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::tuple(ValueList items) {
  Value v(std::move(items));
  v.markup_ = true;
  return v;
}

Value Value::generator(ValueList items) {
  Value v(std::move(items));
  v.generator_ = true;
  return v;
}

Value Value::make_namespace(ValueDict attributes) {
  Value v(std::move(attributes));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.function_ = std::make_shared<const Function>(Function{std::move(name), std::move(fn)});
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList list;
      list.reserve(j.size());
      for (const auto& item : j) list.push_back(from_json(item));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict dict;
      dict.items.reserve(j.size());
      for (const auto& [k, v] : j.items()) dict.items.emplace_back(k, from_json(v));
      return Value(std::move(dict));
    }
    default:
      return Value();
  }
}

double Value::as_double() const {
  return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_);
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !string_->empty();
    case Kind::kList:
      return generator_ || !list_->empty();
    case Kind::kDict:
      return !dict_->items.empty();
    default:
      return true;
  }
}

namespace {

// Python's str.isprintable for the characters chat text realistically contains: controls,
// C1 controls, and the invisible separators / format characters repr escapes.
bool python_printable(char32_t c) {
  if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f)) return false;
  if ((c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0xfeff) return false;
  if ((c >= 0xd800 && c <= 0xdfff) || (c >= 0xe000 && c <= 0xf8ff)) return false;
  return true;
}

std::string string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_to_u32(s)) {
    if (c == static_cast<char32_t>(quote) || c == U'\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c == U'\t') {
      out += "\\t";
    } else if (!python_printable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      out += u32_to_utf8(std::u32string_view(&c, 1));
    }
  }
  out += quote;
  return out;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

const char* python_type_name(const Value& v) {
  if (v.is_generator()) return "generator";
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kFunction:
      return "function";
  }
  return "object";
}

void append_json(const Value& v, int indent, bool sort_keys, int level, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += format_float(d);
      }
      return;
    }
    case Value::Kind::kString:
      out += json_string(v.as_string());
      return;
    case Value::Kind::kList:
      if (v.is_generator()) runtime_error("Object of type generator is not JSON serializable");
      break;
    case Value::Kind::kDict:
      break;
    default:
      runtime_error(std::string("Object of type ") + python_type_name(v) +
                    " is not JSON serializable");
  }
  bool is_list = v.is_list();
  size_t n = is_list ? v.as_list().size() : v.as_dict().items.size();
  if (n == 0) {
    out += is_list ? "[]" : "{}";
    return;
  }
  std::string newline_indent;
  std::string separator = ", ";
  if (indent >= 0) {
    newline_indent.assign(1, '\n').append(static_cast<size_t>(indent) * (level + 1), ' ');
    separator.assign(1, ',').append(newline_indent);
  }
  out += is_list ? '[' : '{';
  out += newline_indent;
  if (is_list) {
    for (size_t i = 0; i < n; ++i) {
      if (i) out += separator;
      append_json(v.as_list()[i], indent, sort_keys, level + 1, out);
    }
  } else {
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& item : v.as_dict().items) items.push_back(&item);
    if (sort_keys) {
      std::stable_sort(items.begin(), items.end(),
                       [](auto* a, auto* b) { return a->first < b->first; });
    }
    for (size_t i = 0; i < n; ++i) {
      if (i) out += separator;
      out += json_string(items[i]->first);
      out += ": ";
      append_json(items[i]->second, indent, sort_keys, level + 1, out);
    }
  }
  if (indent >= 0) out.append(1, '\n').append(static_cast<size_t>(indent) * level, ' ');
  out += is_list ? ']' : '}';
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *string_;
    case Kind::kNamespace:
      return "<Namespace " + Value(ValueDict(*dict_)).repr() + ">";
    case Kind::kFunction:
      return "<function " + function_->name + ">";
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return int_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return format_float(float_);
    case Kind::kString:
      return string_repr(*string_);
    case Kind::kList: {
      if (generator_) return "<generator object>";
      std::string out = markup_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (markup_ && list_->size() == 1) out += ",";
      return out + (markup_ ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        if (i) out += ", ";
        out += string_repr(dict_->items[i].first) + ": " + dict_->items[i].second.repr();
      }
      return out + "}";
    }
    default:
      return str();
  }
}

std::string Value::type_description() const {
  if (kind_ == Kind::kNone) return "None";
  if (kind_ == Kind::kNamespace) return "jinja2.utils.Namespace object";
  return std::string(python_type_name(*this)) + " object";
}

std::string Value::to_json(int indent, bool sort_keys) const {
  std::string out;
  append_json(*this, indent, sort_keys, 0, out);
  return out;
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ != Kind::kFloat && other.kind_ != Kind::kFloat) return int_ == other.int_;
    return as_double() == other.as_double();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return *string_ == *other.string_;
    case Kind::kList: {
      if (generator_ || other.generator_) return list_ == other.list_;
      if (list_->size() != other.list_->size() || markup_ != other.markup_) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].equals((*other.list_)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_->items.size() != other.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* o = other.dict_->find(k);
        if (!o || !v.equals(*o)) return false;
      }
      return true;
    }
    case Kind::kNamespace:
      return dict_ == other.dict_;
    case Kind::kFunction:
      return function_ == other.function_;
    default:
      return false;
  }
}

bool Value::less_than(const Value& other) const {
  if (is_undefined()) runtime_error(undefined_message());
  if (other.is_undefined()) runtime_error(other.undefined_message());
  if (is_number() && other.is_number()) {
    if (kind_ != Kind::kFloat && other.kind_ != Kind::kFloat) return int_ < other.int_;
    return as_double() < other.as_double();
  }
  if (is_string() && other.is_string())
    return *string_ < *other.string_;  // UTF-8 keeps code point order
  if (is_list() && other.is_list()) {
    const ValueList& a = *list_;
    const ValueList& b = *other.list_;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!a[i].equals(b[i])) return a[i].less_than(b[i]);
    }
    return a.size() < b.size();
  }
  runtime_error(std::string("'<' not supported between instances of '") + python_type_name(*this) +
                "' and '" + python_type_name(other) + "'");
}

size_t Value::length() const {
  switch (kind_) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return utf8_length(*string_);
    case Kind::kList:
      if (generator_) runtime_error("object of type 'generator' has no len()");
      return list_->size();
    case Kind::kDict:
      return dict_->items.size();
    default:
      runtime_error(std::string("object of type '") + python_type_name(*this) + "' has no len()");
  }
}

ValueList Value::iterate() const {
  switch (kind_) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
      return *list_;
    case Kind::kDict: {
      ValueList keys;
      for (const auto& item : dict_->items) keys.emplace_back(item.first);
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      for (char32_t c : utf8_to_u32(*string_))
        chars.emplace_back(u32_to_utf8(std::u32string_view(&c, 1)));
      return chars;
    }
    default:
      runtime_error(std::string("'") + python_type_name(*this) + "' object is not iterable");
  }
}

void runtime_error(const std::string& message) {
  throw RenderError(message, false);
}

}  // namespace rapide::jinja
