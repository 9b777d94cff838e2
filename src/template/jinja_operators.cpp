#include "template/jinja_operators.h"

#include <cmath>
#include <string>

namespace rapide::jinja {
namespace {

std::string type_name(const Value& v) {
  switch (v.kind()) {
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
      return v.is_generator() ? "generator" : v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    default:
      return "function";
  }
}

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  if (a.is_string() && op == "+") {
    runtime_error("can only concatenate str (not \"" + type_name(b) + "\") to str");
  }
  if (a.is_list() && op == "+") {
    runtime_error("can only concatenate list (not \"" + type_name(b) + "\") to list");
  }
  runtime_error("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) +
                "' and '" + type_name(b) + "'");
}

Value repeat(const Value& seq, int64_t times) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out));
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  if (a.is_undefined()) runtime_error(a.undefined_message());
  if (b.is_undefined()) runtime_error(b.undefined_message());
  bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value(a.as_int() + b.as_int());
    if (numbers) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      // Markup + str escapes the plain side, as markupsafe does (functionary relies on it).
      if (a.is_markup() || b.is_markup()) {
        std::string lhs = a.is_markup() ? a.as_string() : html_escape(a.as_string());
        std::string rhs = b.is_markup() ? b.as_string() : html_escape(b.as_string());
        return Value::markup(lhs + rhs);
      }
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && !a.is_generator() && !b.is_generator()) {
      ValueList out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value(a.as_int() - b.as_int());
    if (numbers) return Value(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value(a.as_int() * b.as_int());
    if (numbers) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    runtime_error("can't multiply sequence by non-int of type '" + type_name(b) + "'");
  }
  if (op == "/") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0) runtime_error("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0)
      runtime_error(ints ? "integer division or modulo by zero" : "float floor division by zero");
    if (ints) return Value(floor_div(a.as_int(), b.as_int()));
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0)
      runtime_error(ints ? "integer division or modulo by zero" : "float modulo");
    if (ints) return Value(a.as_int() - floor_div(a.as_int(), b.as_int()) * b.as_int());
    double r = std::fmod(a.as_double(), b.as_double());
    if (r != 0 && ((r < 0) != (b.as_double() < 0))) r += b.as_double();
    return Value(r);
  }
  if (op == "**") {
    if (!numbers) unsupported(op, a, b);
    if (ints && b.as_int() >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) result *= a.as_int();
      return Value(result);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  runtime_error("unknown operator " + std::string(op));
}

Value unary_op(std::string_view op, const Value& a) {
  if (a.is_undefined()) runtime_error(a.undefined_message());
  if (a.is_int() || a.is_bool()) return Value(op == "-" ? -a.as_int() : a.as_int());
  if (a.is_float()) return Value(op == "-" ? -a.as_double() : a.as_double());
  runtime_error("bad operand type for unary " + std::string(op) + ": '" + type_name(a) + "'");
}

bool contains(const Value& container, const Value& item) {
  if (item.is_undefined() && !container.is_list()) runtime_error(item.undefined_message());
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        runtime_error("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) {
        if (v.equals(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default:
      runtime_error("argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) runtime_error(obj.undefined_message());
  if ((!obj.is_list() && !obj.is_string()) || obj.is_generator()) {
    runtime_error("'" + type_name(obj) + "' object is not subscriptable");
  }
  auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool())
      runtime_error(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  std::u32string chars;
  int64_t n = 0;
  if (obj.is_string()) {
    chars = utf8_to_u32(obj.as_string());
    n = static_cast<int64_t>(chars.size());
  } else {
    n = static_cast<int64_t>(obj.as_list().size());
  }
  int64_t st = bound(step, "step").value_or(1);
  if (st == 0) runtime_error("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  int64_t lo = adjust(bound(start, "start"), st < 0 ? n - 1 : 0);
  int64_t hi = adjust(bound(stop, "stop"), st < 0 ? -1 : n);
  std::vector<int64_t> picks;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) picks.push_back(i);
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : picks) out += chars[static_cast<size_t>(i)];
    return Value(u32_to_utf8(out));
  }
  ValueList out;
  for (int64_t i : picks) out.push_back(obj.as_list()[static_cast<size_t>(i)]);
  return Value(std::move(out));
}

}  // namespace rapide::jinja
