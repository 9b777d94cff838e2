// Renders a parsed Jinja template with jinja2's scoping rules: `for` bodies and macros get
// their own scope (a `set` inside them does not leak out, hence namespace()), `if` does not;
// macros see the scope they were defined in when they are called. Globals available to every
// template: range, namespace, dict, raise_exception (aborts rendering with the template's own
// message) and strftime_now (transformers' addition).
#pragma once

#include <string>

#include "template/jinja_parser.h"
#include "template/jinja_value.h"

namespace rapide::jinja {

// Throws RenderError; its line is the template line of the failing statement.
std::string render_template(const ParsedTemplate& tmpl, const ValueDict& variables);

}  // namespace rapide::jinja
