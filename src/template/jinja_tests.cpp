#include "template/jinja_tests.h"

#include "template/jinja_operators.h"

namespace rapide::jinja {
namespace {

const Value& required_arg(const CallArgs& args, const std::string& test) {
  const Value* v = args.find(0, "");
  if (!v) runtime_error("test '" + test + "' needs an argument");
  return *v;
}

bool is_lower(const std::string& s) {
  bool cased = false;
  for (unsigned char c : s) {
    if (std::isupper(c)) return false;
    cased |= std::islower(c) != 0;
  }
  return cased;
}

bool is_upper(const std::string& s) {
  bool cased = false;
  for (unsigned char c : s) {
    if (std::islower(c)) return false;
    cased |= std::isupper(c) != 0;
  }
  return cased;
}

}  // namespace

bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "callable") return v.is_function();
  // Undefined defines __iter__ and __len__ / __getitem__, so jinja2 calls it both.
  if (name == "iterable") {
    return v.kind() == K::kUndefined || v.is_string() || v.is_list() || v.is_dict();
  }
  if (name == "sequence") {
    return v.kind() == K::kUndefined || v.is_string() || (v.is_list() && !v.is_generator()) ||
           v.is_dict();
  }
  if (name == "escaped") return v.is_markup();
  if (name == "lower") return v.is_string() && is_lower(v.as_string());
  if (name == "upper") return v.is_string() && is_upper(v.as_string());
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool()) runtime_error("odd/even test needs an integer");
    int64_t r = v.as_int() % 2;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "divisibleby") {
    const Value& d = required_arg(args, name);
    return binary_op("%", v, d).as_double() == 0;
  }
  if (name == "in") return contains(required_arg(args, name), v);
  if (name == "equalto" || name == "eq" || name == "==") return v.equals(required_arg(args, name));
  if (name == "ne" || name == "!=") return !v.equals(required_arg(args, name));
  if (name == "lt" || name == "lessthan" || name == "<")
    return v.less_than(required_arg(args, name));
  if (name == "gt" || name == "greaterthan" || name == ">")
    return required_arg(args, name).less_than(v);
  if (name == "le" || name == "<=") return !required_arg(args, name).less_than(v);
  if (name == "ge" || name == ">=") return !v.less_than(required_arg(args, name));
  if (name == "sameas") {
    const Value& other = required_arg(args, name);
    if (v.kind() != other.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool() || v.is_int()) return v.as_int() == other.as_int();
    return v.equals(other) && (v.is_namespace() || v.is_function());
  }
  runtime_error("No test named '" + name + "'.");
}

}  // namespace rapide::jinja
