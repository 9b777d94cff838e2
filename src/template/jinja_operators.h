// Jinja's operators on values, with the Python semantics jinja2 inherits: int / float
// promotion, floor division and modulo rounding toward negative infinity, str and list
// concatenation and repetition, `in` for substrings / items / keys, and slicing.
#pragma once

#include <string_view>

#include "template/jinja_value.h"

namespace rapide::jinja {

// a <op> b for + - * / // % ** and ~ (string concatenation).
Value binary_op(std::string_view op, const Value& a, const Value& b);

// -a or +a.
Value unary_op(std::string_view op, const Value& a);

// `item in container`.
bool contains(const Value& container, const Value& item);

// obj[start:stop:step] on a list or string; absent bounds are Undefined.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// HTML-escapes like markupsafe.escape (& < > ' ").
std::string html_escape(std::string_view s);

}  // namespace rapide::jinja
