// Splits a Jinja template into tokens the way jinja2's lexer does with the settings
// transformers uses (trim_blocks, lstrip_blocks, no kept trailing newline): template text,
// tag delimiters, and the names / literals / operators inside tags. Whitespace control
// ({%- -%} {{- -}} {#- -#}, {%+ +%}) and comments are resolved here, so the parser only
// sees the text that survives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rapide::jinja {

struct Token {
  enum class Type {
    kText,        // template text, already whitespace-trimmed
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,  // decoded value of a string literal
    kInt,
    kFloat,
    kOperator,
    kEnd,  // end of the template
  };
  Type type;
  std::string text;
  size_t offset;  // in the normalized source, for error positions
};

struct LexedTemplate {
  std::string source;  // newlines normalized to "\n", as token offsets refer to it
  std::vector<Token> tokens;
};

// Throws Error(kInvalidArgument) with line and column for an unterminated tag or string.
LexedTemplate lex_template(std::string_view source);

// "line L, column C" of an offset into the normalized source.
std::string describe_position(const std::string& source, size_t offset);

}  // namespace rapide::jinja
