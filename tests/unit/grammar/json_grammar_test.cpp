// JSON Schema, regex and choice translations, checked against independent oracles: integer
// ranges against arithmetic, regexes against std::regex, schemas against hand-written
// valid / invalid documents.
#include <gtest/gtest.h>

#include <regex>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "grammar/matcher.h"
#include "unit/grammar/grammar_matches.h"

namespace rapide::grammar {
namespace {

using nlohmann::json;

Grammar schema_grammar(const char* schema) {
  return parse_gbnf(json_schema_gbnf(json::parse(schema)));
}

TEST(JsonGrammar, ObjectWithRequiredAndOptionalProperties) {
  const Grammar g = schema_grammar(R"({
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["name"]})");
  EXPECT_TRUE(matches(g, R"({"name": "Ann"})"));
  EXPECT_TRUE(matches(g, R"({"age": 3, "name": "Ann", "tags": ["a", "b"]})"));
  // Members come in the schema's key order (alphabetical, as parsed).
  expect_language(g, {"{\n  \"age\": -12,\n  \"name\": \"A\\\"n\\u00e9\"\n}"},
                  {
                      R"({"name": "Ann", "age": 3})",
                      R"({"age": 3})",                            // name missing
                      R"({"name": "Ann", "x": 1})",               // no additional properties
                      R"({"name": "Ann", "age": 1.5})",           // integer
                      R"({"name": "A", "tags": ["a","b","c"]})",  // maxItems
                      "{\"name\": \"a\nb\"}"                      // raw control character
                  });
}

TEST(JsonGrammar, EnumConstAnyOfAndRefs) {
  const Grammar g = schema_grammar(R"({
    "$defs": {"node": {"type": "object", "properties": {
        "value": {"enum": ["a", 1, null]},
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
      "required": ["value", "next"]}},
    "$ref": "#/$defs/node"})");
  expect_language(
      g,
      {R"({"next": null, "value": "a"})", R"({"next": {"next": null, "value": null}, "value": 1})"},
      {R"({"next": null, "value": "b"})"});
  const Grammar c = schema_grammar(R"({"const": {"k": [1, true]}})");
  EXPECT_TRUE(matches(c, R"({"k":[1,true]})"));
  EXPECT_FALSE(matches(c, R"({"k":[1,false]})"));
}

TEST(JsonGrammar, AdditionalPropertiesSchema) {
  const Grammar g =
      schema_grammar(R"({"type": "object", "additionalProperties": {"type": "number"}})");
  expect_language(g, {"{}", R"({"a": 1.5, "b": -2e3})"}, {R"({"a": "x"})"});
}

TEST(JsonGrammar, StringFormatsAndLengths) {
  const Grammar date = schema_grammar(R"({"type": "string", "format": "date"})");
  expect_language(date, {R"("2024-02-28")", R"("0001-12-31")"},
                  {R"("2024-13-01")", R"("0000-01-01")", R"("2023-02-30")", R"("2023-04-31")"});
  const Grammar dt = schema_grammar(R"({"type": "string", "format": "date-time"})");
  expect_language(dt, {R"("2024-02-28T23:59:01Z")", R"("2024-01-31T23:59:01.123+02:00")"},
                  {R"("2024-02-28 23:59:01Z")"});
  const Grammar uuid = schema_grammar(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(uuid, R"("123e4567e89b12d3a456426614174000")"));
  const Grammar len = schema_grammar(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  expect_language(len, {R"("ab")", R"("a\nc")"}, {R"("a")", R"("abcd")"});
}

TEST(JsonGrammar, IntegerRangesMatchArithmetic) {
  struct Case {
    const char* schema;
    int64_t lo, hi;  // the allowed range (inclusive)
  };
  const Case cases[] = {
      {R"({"type": "integer", "minimum": 7, "maximum": 1234})", 7, 1234},
      {R"({"type": "integer", "minimum": -45, "maximum": 38})", -45, 38},
      {R"({"type": "integer", "exclusiveMinimum": -10, "exclusiveMaximum": -3})", -9, -4},
      {R"({"type": "integer", "minimum": 95})", 95, INT64_MAX},
      {R"({"type": "integer", "maximum": -20})", INT64_MIN, -20},
      {R"({"type": "integer", "minimum": 0, "maximum": 100})", 0, 100}};
  for (const Case& c : cases) {
    const Grammar g = schema_grammar(c.schema);
    for (int64_t v = -1100; v <= 1300; ++v) {
      EXPECT_EQ(matches(g, std::to_string(v)), v >= c.lo && v <= c.hi) << c.schema << " " << v;
    }
    EXPECT_FALSE(matches(g, "007"));
  }
}

TEST(JsonGrammar, BoundedNumbersStayInRange) {
  const Grammar g = schema_grammar(R"({"type": "number", "minimum": 0, "maximum": 10})");
  expect_language(g, {"10", "9.75", "0.5"}, {"10.5", "-0.5", "11"});
}

TEST(JsonGrammar, RegexAgreesWithStdRegex) {
  const char* patterns[] = {"^[A-Z]{2}-[0-9]{3,4}$",
                            "(ab|cd)*e?",
                            "\\d+(\\.\\d{1,2})?",
                            "[^a-c]x.",
                            "a(?:b|c)+d",
                            "\\w\\s\\W"};
  const char* inputs[] = {"AB-123", "AB-12345", "ab-123", "",    "abcde", "cdab", "e",
                          "abe",    "12",       "12.5",   "12.", "3.14",  "dxz",  "axz",
                          "d\nz",   "abcbd",    "ad",     "a b", "a bc",  "_\t!"};
  for (const char* p : patterns) {
    std::string stripped = p;
    const Grammar g = parse_gbnf(regex_gbnf(p));
    const std::regex oracle(stripped);
    for (const char* in : inputs) {
      EXPECT_EQ(matches(g, in), std::regex_match(in, oracle)) << p << " on '" << in << "'";
    }
  }
}

TEST(JsonGrammar, PatternInsideJsonStrings) {
  const Grammar g = schema_grammar(R"({"type": "string", "pattern": "^a\"b$"})");
  EXPECT_TRUE(matches(g, R"("a\"b")"));
  EXPECT_FALSE(matches(g, R"("a"b")"));
}

TEST(JsonGrammar, ChoicesAndJsonObject) {
  const Grammar c = parse_gbnf(choice_gbnf({"red", "green", "re\"d"}));
  expect_language(c, {"green", "re\"d"}, {"gree"});
  const Grammar o = parse_gbnf(json_object_gbnf());
  expect_language(o, {R"({"a": [1, {"b": null}, "x", -0.5e+3, true]})"}, {"[1]", R"({"a": 01})"});
}

TEST(JsonGrammar, UnsupportedKeywordsAreNamed) {
  auto message = [](const char* schema) {
    try {
      json_schema_gbnf(json::parse(schema));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"allOf": [{"type": "string"}]})").find("'allOf'"), std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "properties": {"a": {"not": {}}}})").find("'not'"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "string", "format": "email"})").find("'format'"),
            std::string::npos);
  EXPECT_NE(message(R"({"$ref": "http://x"})").find("'$ref'"), std::string::npos);
  EXPECT_NE(message(R"({"type": "string", "pattern": "(a)\\1"})").find("regex"), std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "required": ["x"]})").find("'x'"), std::string::npos);
}

TEST(JsonGrammar, DeeplyNestedRegexIsRefused) {
  // The translator recurses per group; 100,000 groups overflowed its stack.
  auto nested = [](size_t depth) {
    return std::string(depth, '(') + "a" + std::string(depth, ')');
  };
  EXPECT_TRUE(matches(parse_gbnf(regex_gbnf(nested(200))), "a"));
  try {
    regex_gbnf(nested(100000));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("nested deeper than 256"), std::string::npos);
  }
}

}  // namespace
}  // namespace rapide::grammar
