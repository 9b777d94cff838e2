// The values a Jinja template computes with, modelled on the Python objects jinja2 sees when
// transformers renders a chat template: None, bool, int, float, str, list, dict (insertion
// ordered, string keys), plus jinja2's Undefined, namespace() objects and callables (macros,
// bound methods, globals such as raise_exception).
//
// Why Python semantics and not JSON semantics: the prompt a model was trained on was produced
// by jinja2, so printing, truthiness, equality and arithmetic must follow Python exactly
// (1.0 prints "1.0", [1, 'a'] prints "[1, 'a']", 7 / 2 == 3.5, -7 // 2 == -4).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/jinja_text.h"

namespace rapide::jinja {

class Value;
using ValueList = std::vector<Value>;

// A Python dict restricted to string keys (all chat-template data comes from JSON objects),
// kept in insertion order like Python 3.7+.
struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

// Arguments of a call: positional then keyword, as written at the call site.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index`, or the keyword `name`, or nullptr when absent.
  const Value* find(size_t index, std::string_view name) const;
  // Like find, with a default for an absent argument.
  Value get(size_t index, std::string_view name, const Value& fallback) const;
};

using NativeFunction = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kFunction
  };

  Value() = default;  // Undefined
  static Value undefined(std::string message);
  static Value none();
  Value(bool b);
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v);
  Value(double v);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(ValueList list);
  Value(ValueDict dict);
  static Value markup(std::string s);   // a string marked safe (jinja2's Markup)
  static Value tuple(ValueList items);  // a list that prints as (a, b) and != the same list
  // What jinja2's map / select / unique / items / reverse filters return: a Python generator,
  // iterable but always true, without len(), not JSON serializable (templates add |list).
  static Value generator(ValueList items);
  static Value make_namespace(ValueDict attributes);
  static Value function(std::string name, NativeFunction fn);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_tuple() const { return kind_ == Kind::kList && markup_; }
  bool is_generator() const { return kind_ == Kind::kList && generator_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // also valid for bool
  double as_double() const;                // int, bool or float
  const std::string& as_string() const { return *string_; }
  const ValueList& as_list() const { return *list_; }
  const ValueDict& as_dict() const { return *dict_; }  // dict or namespace
  ValueDict& namespace_attributes() const { return *dict_; }
  const NativeFunction& as_function() const { return function_->fn; }
  const std::string& function_name() const { return function_->name; }
  // Why this value is undefined, in jinja2's words ("'x' is undefined").
  const std::string& undefined_message() const { return *string_; }

  // Python truthiness (bool(x)); Undefined is false.
  bool truthy() const;
  // Python str(x): what {{ x }} prints. Undefined prints as "".
  std::string str() const;
  // Python repr(x): how x appears inside a printed list or dict.
  std::string repr() const;
  // jinja2's name for the type in messages ("dict object", "None").
  std::string type_description() const;
  // json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys) as transformers'
  // tojson filter calls it; indent < 0 means None (single line with ", " and ": ").
  std::string to_json(int indent, bool sort_keys) const;

  // Python ==, with 1 == 1.0 == True and deep comparison of containers.
  bool equals(const Value& other) const;
  // Python <, for numbers, strings and lists; throws for other mixes.
  bool less_than(const Value& other) const;
  // len(x) for strings (code points), lists, dicts; 0 for Undefined.
  size_t length() const;
  // The items `for x in value` visits: list items, dict keys, string characters. Throws
  // "'NoneType' object is not iterable" like Python for values that are not iterable.
  ValueList iterate() const;

 private:
  struct Function {
    std::string name;
    NativeFunction fn;
  };

  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;  // Markup for strings, tuple for lists
  bool generator_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;  // string, or the undefined message
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueDict> dict_;  // shared and mutable for namespaces
  std::shared_ptr<const Function> function_;
};

// An error while rendering: a message in jinja2's words, the template line once known, and
// whether the template itself raised it with raise_exception (then the message is verbatim).
class RenderError : public std::runtime_error {
 public:
  RenderError(const std::string& message, bool raised_by_template)
      : std::runtime_error(message), raised_by_template_(raised_by_template) {}
  bool raised_by_template() const { return raised_by_template_; }
  int line = 0;

 private:
  bool raised_by_template_;
};

// Throws RenderError(message) for a failed template operation.
[[noreturn]] void runtime_error(const std::string& message);

}  // namespace rapide::jinja
