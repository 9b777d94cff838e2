// Builds the syntax tree of a Jinja template from its tokens, with jinja2's grammar and
// operator precedence (filters bind tighter than unary minus's operand allows, `not` looser
// than comparisons, `x if c else y` loosest).
#pragma once

#include <string>
#include <string_view>

#include "template/jinja_ast.h"

namespace rapide::jinja {

struct ParsedTemplate {
  std::string source;  // normalized source, for error positions
  StmtList body;
};

// Throws Error(kInvalidArgument) "chat template syntax error at line L, column C: ...".
ParsedTemplate parse_template(std::string_view source);

}  // namespace rapide::jinja
