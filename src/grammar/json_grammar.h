// JSON Schema, regular expressions and choice lists -> GBNF text (gbnf.h), the forms the
// OpenAI and vLLM request fields take: response_format json_object / json_schema,
// guided_regex, guided_choice, and tool-call arguments.
//
// JSON Schema coverage (what real tool and response schemas use):
//   type (one or a list), properties + required, additionalProperties (false, true or a
//   schema; absent = false, as llama.cpp), items, prefixItems, minItems / maxItems, enum,
//   const, string minLength / maxLength / pattern / format (date, time, date-time, uuid),
//   integer and number minimum / maximum / exclusiveMinimum / exclusiveMaximum, boolean,
//   null, anyOf, oneOf (as anyOf: exclusivity is not enforced), $ref to #/$defs/... or
//   #/definitions/..., and annotations (title, description, default, examples, ...).
// Anything else throws Error(kUnsupported) naming the keyword, e.g. "unsupported JSON Schema
// keyword 'allOf'". Properties come out in the schema's key order as parsed; numbers with
// bounds are generated as in-range integers, plus decimals when the range is non-negative.
//
// Whitespace between tokens is limited (a space, or a newline and up to 20 indent
// characters), so a model cannot pad forever.
//
// Limits (the matcher follows every alternative at once; grammar/cost.h), each an
// Error(kInvalidArgument) naming the construct: at most kMaxOptionalProperties optional
// properties per object, kMaxAlternatives alternatives per anyOf / oneOf (nested ones and type
// lists flattened), and a `pattern` within the cost model on its own ("'pattern' '(.*){2000}':
// ..."). The grammar is linear in the schema's size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rapide::grammar {

inline constexpr size_t kMaxOptionalProperties = 1000;
inline constexpr size_t kMaxAlternatives = 1000;

// Any JSON value ("json_object" asks for an object at the top).
std::string json_object_gbnf();
// The grammar of documents valid under `schema`; the root rule is `root`.
std::string json_schema_gbnf(const nlohmann::json& schema);
// Rules for `schema` added to an existing grammar text under `prefix` (tool calls embed
// several schemas in one grammar); returns the name of the schema's rule.
std::string add_json_schema_rules(const nlohmann::json& schema, const std::string& prefix,
                                  std::string& gbnf);
// A practical regex subset (literals, escapes \d \w \s and their negations, classes,
// `.`, groups, alternation, * + ? {m,n}, anchors at the ends) matched in full. Backreferences
// and lookaround throw Error(kUnsupported).
std::string regex_gbnf(std::string_view pattern);
// Exactly one of `choices`.
std::string choice_gbnf(const std::vector<std::string>& choices);
// A GBNF literal for raw bytes ("..." with escapes).
std::string gbnf_literal(std::string_view text);

}  // namespace rapide::grammar
