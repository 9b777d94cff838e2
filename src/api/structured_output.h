// The request fields that constrain a generation -> the grammar constraint the engine applies.
//
//   response_format: {"type": "text"} (none), {"type": "json_object"} (any JSON object),
//     {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} (both endpoints)
//   grammar: llama.cpp GBNF text;  guided_regex: a regex;  guided_choice: a list of strings
//     (vLLM's extensions)
// At most one of them per request. A grammar that does not parse, a schema with an
// unsupported keyword or a bad regex is a 400 naming the field and, for schemas, the keyword;
// so is a grammar over the cost model's limits (grammar/cost.h), naming the construct. One the
// model's vocabulary cannot start is refused by the engine at admission (400 naming the
// field: GenerationSpec::constraint_param).
// Compiled constraints are kept by grammar text (a small LRU), so requests with the same
// schema share one grammar and its mask cache.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/constraint.h"

namespace rapide::api {

// The constraint `body` asks for, or null. Throws ApiError(400).
std::shared_ptr<const grammar::Constraint> read_constraint(const nlohmann::json& body);

// The compiled constraint of GBNF text, from the cache. Throws ApiError(400) naming `param`.
std::shared_ptr<const grammar::Constraint> constraint_for_gbnf(const std::string& gbnf,
                                                               const std::string& param);

}  // namespace rapide::api
