// The grammar cost model (cost.h) and the JSON Schema limits: each red-team grammar of issue
// 53 (N1, N2), and shapes like them it did not show, is refused at admission with the
// construct named; realistic schemas, regexes and grammars stay well inside the limits.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <functional>
#include <string>

#include "base/error.h"
#include "grammar/cost.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "unit/grammar/grammar_matches.h"

namespace rapide::grammar {
namespace {

using nlohmann::json;

// The admission path of a request grammar: translate, compile, check.
void admit_gbnf(const std::string& gbnf) {
  check_cost(parse_gbnf(gbnf));
}

// The message of the Error(kInvalidArgument) that `f` throws ("" and a test failure if none).
std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "admitted";
  return "";
}

json anyof_tree(int depth) {
  return depth == 0 ? json{{"type", "integer"}}
                    : json{{"anyOf", {anyof_tree(depth - 1), anyof_tree(depth - 1)}}};
}

json optional_properties(int n) {
  json props = json::object();
  for (int i = 0; i < n; ++i) props[fmt::format("p{}", i)] = {{"type", "integer"}};
  return {{"type", "object"}, {"properties", props}};
}

TEST(GrammarCost, IssueAttacksAreRefusedNamingTheConstruct) {
  // N1: guided_regex "(.*){2000}".
  std::string m = refusal([] { admit_gbnf(regex_gbnf("(.*){2000}")); });
  EXPECT_NE(m.find("repetition '([^\\n]*){2000}' in rule 'root'"), std::string::npos) << m;
  EXPECT_NE(m.find("2000 consecutive parts that can match the empty string"), std::string::npos)
      << m;
  EXPECT_NE(m.find("the limit is 4096"), std::string::npos) << m;
  // (x?){10000}x{10000}: the nullable half is the culprit, not the 10000 x.
  m = refusal([] { admit_gbnf(regex_gbnf("(x?){10000}x{10000}")); });
  EXPECT_NE(m.find("repetition '(\"x\"?){10000}'"), std::string::npos) << m;
  // A json_schema string "pattern": named as the pattern the client wrote.
  m = refusal([] {
    admit_gbnf(json_schema_gbnf({{"type", "string"}, {"pattern", "(.*){10000}"}}));
  });
  EXPECT_NE(m.find("'pattern' '(.*){10000}'"), std::string::npos) << m;
  EXPECT_NE(m.find("10000 consecutive parts"), std::string::npos) << m;
  // An anyOf tree of 2^16 leaves (32 KB of schema).
  m = refusal([] { json_schema_gbnf(anyof_tree(16)); });
  EXPECT_NE(m.find("anyOf at 'schema-root' has 65536 alternatives"), std::string::npos) << m;
  // N2: 5000 optional properties, refused before any rule is made for them.
  m = refusal([] { json_schema_gbnf(optional_properties(5000)); });
  EXPECT_NE(m.find("has 5000 optional properties; at most 1000"), std::string::npos) << m;
}

TEST(GrammarCost, ShapesTheIssueDidNotShowAreRefusedToo) {
  // Nested repetitions multiply without unrolling much: 3 levels of 20 copies are 8000 ways.
  std::string m = refusal([] { admit_gbnf(R"(root ::= ((("x"?){20}){20}){20})"); });
  EXPECT_NE(m.find("repetition '(((\"x\"?){20}){20}){20}'"), std::string::npos) << m;
  EXPECT_NE(m.find("20 consecutive parts"), std::string::npos) << m;
  // A rule of many alternatives, and a rule that refers to one through a chain of rules.
  std::string many = "root ::= x\nx ::= \"a\"";
  for (int i = 0; i < 5000; ++i) many += " | \"a\"";
  m = refusal([&] { admit_gbnf(many); });
  EXPECT_NE(m.find("rule 'x': its 5001 alternatives"), std::string::npos) << m;
  // Doubling through nullable rules: r0 ::= r1 r1, r1 ::= r2 r2, ... 2^60 ways (saturating,
  // not overflowing into a small number).
  std::string doubling = "root ::= r0 \"x\"\n";
  for (int i = 0; i < 60; ++i) doubling += fmt::format("r{} ::= r{} r{}\n", i, i + 1, i + 1);
  doubling += "r60 ::= \"y\" | \"\"\n";
  EXPECT_GT(widest_expansion(parse_gbnf(doubling)), uint64_t{1} << 59);
  m = refusal([&] { admit_gbnf(doubling); });
  EXPECT_NE(m.find("2 consecutive parts"), std::string::npos) << m;
  // GBNF repetition of a nullable group (the regex attack written as a grammar).
  m = refusal([] { admit_gbnf("root ::= (\"a\"*){3000}"); });
  EXPECT_NE(m.find("repetition '(\"a\"*){3000}'"), std::string::npos) << m;
  // anyOf counted through nested anyOf / oneOf and type lists.
  json wide = json::array();
  for (int i = 0; i < 400; ++i)
    wide.push_back({{"oneOf", {{{"type", {"integer", "null", "string"}}}}}});
  m = refusal([&] { json_schema_gbnf({{"anyOf", wide}}); });
  EXPECT_NE(m.find("has 1200 alternatives"), std::string::npos) << m;
}

TEST(GrammarCost, RealisticGrammarsAreWellInside) {
  // The e2e structured-output test's and the mask benchmark's schemas, a tool-call grammar's
  // parts, and the wide but honest shapes: a 1000-value enum, 1000 optional properties,
  // 5000 required ones, a 1000-branch anyOf of objects.
  const char* schemas[] = {
      R"({"type": "object", "properties": {
          "name": {"type": "string", "minLength": 1, "maxLength": 12},
          "age": {"type": "integer", "minimum": 0, "maximum": 120},
          "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$"},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
                   "minItems": 1, "maxItems": 3}},
        "required": ["name", "age"], "additionalProperties": false})",
      R"({"$defs": {"item": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "qty": {"type": "integer", "exclusiveMinimum": 0, "maximum": 99},
            "price": {"type": "number", "minimum": 0, "maximum": 1000}},
          "required": ["sku", "qty", "price"]}},
        "type": "object", "properties": {
          "id": {"type": "string", "format": "uuid"},
          "status": {"enum": ["pending", "shipped", "delivered"]},
          "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
          "placed": {"type": "string", "format": "date-time"},
          "note": {"type": ["string", "null"]}, "gift": {"type": "boolean"}},
        "required": ["id", "status", "items", "placed"]})",
      R"({"anyOf": [{"type": "object", "properties": {"city": {"type": "string"},
                       "celsius": {"type": "number", "minimum": -50, "maximum": 50},
                       "day": {"type": "string", "format": "date"}},
                     "required": ["city", "celsius", "day"]},
                    {"type": "object", "properties": {"error": {"const": "unknown city"},
                       "code": {"type": ["integer", "null"]}}, "required": ["error", "code"]}]})",
      R"({"type": "object", "additionalProperties": {"type": "array", "items": {}}})",
  };
  for (const char* s : schemas) {
    const std::string gbnf = json_schema_gbnf(json::parse(s));
    EXPECT_LT(widest_expansion(parse_gbnf(gbnf)), 200u) << s;
  }
  EXPECT_LT(widest_expansion(parse_gbnf(json_object_gbnf())), 200u);
  for (const char* regex : {"(cat|dog)-[0-9]{2,3}( [a-z]{1,8})?", "[A-Z][a-z]*(, [A-Z][a-z]*)*",
                            "\\d{4}-\\d{2}-\\d{2}", "(.*)", "[^\\n]{0,4000}"}) {
    EXPECT_LT(widest_expansion(parse_gbnf(regex_gbnf(regex))), 100u) << regex;
  }
  json values = json::array();
  for (int i = 0; i < 1000; ++i) values.push_back(fmt::format("value {}", i));
  EXPECT_NO_THROW(admit_gbnf(json_schema_gbnf({{"enum", values}})));
  EXPECT_NO_THROW(admit_gbnf(json_schema_gbnf(optional_properties(1000))));
  json required = optional_properties(5000);
  for (int i = 0; i < 5000; ++i) required["required"].push_back(fmt::format("p{}", i));
  EXPECT_LT(widest_expansion(parse_gbnf(json_schema_gbnf(required))), 100u);
  json branches = json::array();
  for (int i = 0; i < 1000; ++i) {
    const std::string key = fmt::format("k{}", i);
    branches.push_back(
        {{"type", "object"}, {"properties", {{key, {{"type", "integer"}}}}}, {"required", {key}}});
  }
  EXPECT_NO_THROW(admit_gbnf(json_schema_gbnf({{"anyOf", branches}})));
}

TEST(GrammarCost, ObjectGrammarIsLinearInItsProperties) {
  // 1000 optional properties: once a quadratic 15 MB of grammar text, now about 60 bytes a
  // property.
  const json schema = optional_properties(1000);
  const std::string gbnf = json_schema_gbnf(schema);
  EXPECT_LT(gbnf.size(), 100 * schema.dump().size());
  // The language is unchanged: members in key order, any optional subset, the required one
  // present, commas only between members, additional properties after the named ones.
  const Grammar g = parse_gbnf(json_schema_gbnf(json::parse(R"({"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                     "c": {"type": "integer"}, "d": {"type": "integer"}},
      "required": ["c"], "additionalProperties": {"type": "boolean"}})")));
  expect_language(
      g,
      {R"({"c": 1})", R"({"a": 1, "c": 2})", R"({"b": 1, "c": 2, "d": 3})",
       R"({"a": 1, "b": 2, "c": 3, "d": 4})", R"({"c": 1, "x": true, "y": false})",
       R"({"a": 1, "c": 1, "d": 2, "x": true})"},
      {"{}", R"({"a": 1})", R"({"a": 1, "d": 2})", R"({"c": 1, "a": 2})", R"({"a": 1,, "c": 2})",
       R"({, "c": 1})", R"({"c": 1,})", R"({"c": 1, "x": 1})", R"({"c": 1, "c": 2})"});
  const Grammar optional = parse_gbnf(json_schema_gbnf(optional_properties(3)));
  expect_language(optional, {"{}", R"({"p1": 1})", R"({"p0": 1, "p2": 3})"},
                  {R"({"p2": 1, "p0": 1})", R"({"p0": 1 "p1": 2})", R"({,})"});
}

}  // namespace
}  // namespace rapide::grammar
