// jinja2's built-in tests (`value is name(args)`): defined, none, string, mapping, iterable,
// equalto, divisibleby, ... with jinja2's definitions (Undefined is iterable, bool counts as a
// number but not as an integer).
#pragma once

#include <string>

#include "template/jinja_value.h"

namespace rapide::jinja {

// Applies test `name`; throws RenderError "No test named 'x'." for an unknown test.
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);

}  // namespace rapide::jinja
