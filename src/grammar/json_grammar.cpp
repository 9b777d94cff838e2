#include "grammar/json_grammar.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "base/error.h"
#include "grammar/cost.h"
#include "grammar/gbnf.h"
#include "tokenizer/utf8.h"

namespace rapide::grammar {

using nlohmann::json;

namespace {

// Shared by every JSON grammar; added once per grammar text.
constexpr std::string_view kPrimitives = R"(
json-ws ::= ("" | " " | "\n" [ \t]{0,20})
json-char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" json-ws (json-string ":" json-ws json-value json-ws ("," json-ws json-string ":" json-ws json-value json-ws)*)? "}"
json-array ::= "[" json-ws (json-value json-ws ("," json-ws json-value json-ws)*)? "]"
)";

void add_primitives(std::string& gbnf) {
  if (gbnf.find("\njson-ws ::=") == std::string::npos) gbnf += kPrimitives;
}

// Keywords that only annotate a schema.
const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default",    "examples", "$schema",
    "$id",   "$comment",    "deprecated", "readOnly", "writeOnly",
    "$defs", "definitions", "strict",     "nullable", "discriminator"};
const std::set<std::string, std::less<>> kSupported = {"type",
                                                       "properties",
                                                       "required",
                                                       "additionalProperties",
                                                       "items",
                                                       "prefixItems",
                                                       "minItems",
                                                       "maxItems",
                                                       "enum",
                                                       "const",
                                                       "pattern",
                                                       "format",
                                                       "minLength",
                                                       "maxLength",
                                                       "minimum",
                                                       "maximum",
                                                       "exclusiveMinimum",
                                                       "exclusiveMaximum",
                                                       "anyOf",
                                                       "oneOf",
                                                       "$ref"};

// Digits of non-negative integers lo..hi (same digit count or not), as GBNF alternatives:
// the classic split into ranges whose numbers share a prefix and end in full digit runs.
void digit_ranges(uint64_t lo, uint64_t hi, std::vector<std::string>& out) {
  if (lo > hi) return;
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  if (a.size() < b.size()) {
    uint64_t top = 9;
    for (size_t i = 1; i < a.size(); ++i) top = top * 10 + 9;
    digit_ranges(lo, top, out);
    digit_ranges(top + 1, hi, out);
    return;
  }
  // Same length: find the first differing digit.
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  const std::string prefix = a.substr(0, i);
  if (i == a.size()) {
    out.push_back(gbnf_literal(a));
    return;
  }
  const size_t rest = a.size() - i - 1;
  const bool a_tail_zero = a.find_first_not_of('0', i + 1) == std::string::npos;
  const bool b_tail_nine = b.find_first_not_of('9', i + 1) == std::string::npos;
  auto run = [&](char d0, char d1) {
    std::string s = prefix.empty() ? "" : gbnf_literal(prefix) + " ";
    s += d0 == d1 ? gbnf_literal(std::string(1, d0)) : fmt::format("[{}-{}]", d0, d1);
    if (rest > 0) s += fmt::format(" [0-9]{{{}}}", rest);
    out.push_back(s);
  };
  if (a_tail_zero && b_tail_nine) {
    run(a[i], b[i]);
    return;
  }
  uint64_t p10 = 1;
  for (size_t k = 0; k < rest; ++k) p10 *= 10;
  const uint64_t base = lo - lo % (p10 * 10);  // lo with digits from i on zeroed
  const uint64_t da = static_cast<uint64_t>(a[i] - '0'), db = static_cast<uint64_t>(b[i] - '0');
  uint64_t first_full = da, last_full = db;
  if (!a_tail_zero) {
    digit_ranges(lo, base + da * p10 + p10 - 1, out);
    first_full = da + 1;
  }
  if (!b_tail_nine) last_full = db - 1;
  if (first_full <= last_full)
    run(static_cast<char>('0' + first_full), static_cast<char>('0' + last_full));
  if (!b_tail_nine) digit_ranges(base + db * p10, hi, out);
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

// Integers in [lo, hi] (either bound may be absent).
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  constexpr uint64_t kMaxDigits = 16;
  auto at_least = [&](uint64_t min) {  // non-negative integers >= min
    const size_t len = std::to_string(min).size();
    std::vector<std::string> alts;
    uint64_t top = 9;
    for (size_t i = 1; i < len; ++i) top = top * 10 + 9;
    digit_ranges(min, top, alts);
    if (len < kMaxDigits) alts.push_back(fmt::format("[1-9] [0-9]{{{},{}}}", len, kMaxDigits - 1));
    return "(" + join(alts, " | ") + ")";
  };
  auto between = [](uint64_t a, uint64_t b) {
    std::vector<std::string> alts;
    digit_ranges(a, b, alts);
    return "(" + join(alts, " | ") + ")";
  };
  std::vector<std::string> alts;
  // Negative part: "-" then magnitudes.
  if (!lo || *lo < 0) {
    const uint64_t min_mag = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    if (!lo)
      alts.push_back("\"-\" " + at_least(min_mag));
    else
      alts.push_back("\"-\" " + between(min_mag, static_cast<uint64_t>(-*lo)));
  }
  // Non-negative part.
  if (!hi || *hi >= 0) {
    const uint64_t min = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    if (!hi)
      alts.push_back(at_least(min));
    else
      alts.push_back(between(min, static_cast<uint64_t>(*hi)));
  }
  if (alts.empty()) fail(ErrorCode::kInvalidArgument, "JSON Schema: empty integer range");
  return "(" + join(alts, " | ") + ")";
}

class RegexTranslator {
 public:
  RegexTranslator(std::string_view pattern, bool json_string) : p_(pattern), json_(json_string) {}

  std::string translate() {
    if (!p_.empty() && p_.front() == '^') ++pos_;
    std::string out = alternation();
    if (pos_ < p_.size()) unsupported(fmt::format("unexpected '{}'", p_[pos_]));
    return "(" + out + ")";
  }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    fail(ErrorCode::kUnsupported, "regex '{}': {} (unsupported regex feature)", p_, what);
  }

  // Bytes a JSON string cannot hold raw, removed from classes in JSON mode.
  std::string json_exclusions() const { return json_ ? "\"\\\\\\x00-\\x1F" : ""; }

  std::string literal(char c) const {
    if (json_ && c == '"') return "\"\\\\\\\"\"";
    if (json_ && c == '\\') return "\"\\\\\\\\\"";
    return gbnf_literal(std::string(1, c));
  }

  static std::string class_escape(char c) {
    if (c == '\\' || c == ']' || c == '[' || c == '^' || c == '-' || c == '"')
      return std::string("\\") + c;
    if (static_cast<unsigned char>(c) < 0x20)
      return fmt::format("\\x{:02X}", static_cast<unsigned char>(c));
    return std::string(1, c);
  }

  // \d \w \s as class contents; empty when `e` is not one of them.
  static std::string shorthand(char e) {
    switch (e) {
      case 'd':
      case 'D':
        return "0-9";
      case 'w':
      case 'W':
        return "a-zA-Z0-9_";
      case 's':
      case 'S':
        return " \\t\\n\\r";
      default:
        return "";
    }
  }

  std::string escaped_char(char e) const {
    if (e == 'n') return "\n";
    if (e == 't') return "\t";
    if (e == 'r') return "\r";
    if ((e >= '0' && e <= '9') || e == 'b' || e == 'B' || e == 'k')
      unsupported(fmt::format("\\{}", e));
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) unsupported(fmt::format("\\{}", e));
    return std::string(1, e);
  }

  std::string char_class() {
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < p_.size() && p_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::string items;
    bool first = true;
    while (pos_ < p_.size() && (p_[pos_] != ']' || first)) {
      first = false;
      char c = p_[pos_++];
      if (c == '\\' && pos_ < p_.size()) {
        const char e = p_[pos_++];
        const std::string s = shorthand(e);
        if (!s.empty()) {
          if (e == 'D' || e == 'W' || e == 'S') unsupported(fmt::format("\\{} inside a class", e));
          items += s;
          continue;
        }
        c = escaped_char(e)[0];
      }
      if (json_ && !negated && (c == '"' || c == '\\')) continue;
      items += class_escape(c);
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        char hi = p_[pos_++];
        if (hi == '\\' && pos_ < p_.size()) hi = escaped_char(p_[pos_++])[0];
        items += "-" + class_escape(hi);
      }
    }
    if (pos_ >= p_.size()) unsupported("unterminated class");
    ++pos_;
    if (negated) return "[^" + items + json_exclusions() + "]";
    if (items.empty()) unsupported("empty class");
    return "[" + items + "]";
  }

  std::string atom() {
    const char c = p_[pos_];
    if (c == '(') {
      // The translator recurses once per group; a pattern comes from an untrusted request.
      constexpr int kMaxNesting = 256;
      if (++nesting_ > kMaxNesting) {
        unsupported(fmt::format("groups nested deeper than {}", kMaxNesting));
      }
      ++pos_;
      if (p_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (pos_ < p_.size() && p_[pos_] == '?') {
        unsupported("lookaround or named group");
      }
      std::string inner = alternation();
      if (pos_ >= p_.size() || p_[pos_] != ')') unsupported("unbalanced '('");
      ++pos_;
      --nesting_;
      return "(" + inner + ")";
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      return "[^\\n" + json_exclusions() + "]";
    }
    if (c == '\\') {
      if (pos_ + 1 >= p_.size()) unsupported("trailing backslash");
      const char e = p_[pos_ + 1];
      pos_ += 2;
      const std::string s = shorthand(e);
      if (!s.empty()) {
        const bool negated = e == 'D' || e == 'W' || e == 'S';
        return negated ? "[^" + s + json_exclusions() + "]" : "[" + s + "]";
      }
      return literal(escaped_char(e)[0]);
    }
    if (c == '$') unsupported("'$' before the end");
    if (c == '^') unsupported("'^' after the start");
    if (static_cast<unsigned char>(c) >= 0x80) {  // a whole UTF-8 character
      const size_t n = std::min(utf8::sequence_length(static_cast<uint8_t>(c)), p_.size() - pos_);
      pos_ += n;
      return gbnf_literal(p_.substr(pos_ - n, n));
    }
    ++pos_;
    return literal(c);
  }

  std::string sequence() {
    std::vector<std::string> items;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') {
      if (p_[pos_] == '$' && pos_ + 1 == p_.size()) {
        ++pos_;
        break;
      }
      std::string a = atom();
      if (pos_ < p_.size()) {
        const char q = p_[pos_];
        if (q == '*' || q == '+' || q == '?') {
          a += q;
          ++pos_;
        } else if (q == '{') {
          const size_t end = p_.find('}', pos_);
          if (end == std::string_view::npos) unsupported("unterminated '{'");
          a += std::string(p_.substr(pos_, end - pos_ + 1));
          pos_ = end + 1;
        }
        if (a.size() > 0 && pos_ < p_.size() &&
            (a.back() == '*' || a.back() == '+' || a.back() == '?' || a.back() == '}')) {
          if (p_[pos_] == '?')
            ++pos_;  // lazy: the same language
          else if (p_[pos_] == '+')
            unsupported("possessive quantifier");
        }
      }
      items.push_back(std::move(a));
    }
    return items.empty() ? "\"\"" : join(items, " ");
  }

  std::string alternation() {
    std::vector<std::string> alts{sequence()};
    while (pos_ < p_.size() && p_[pos_] == '|') {
      ++pos_;
      alts.push_back(sequence());
    }
    return join(alts, " | ");
  }

  std::string_view p_;
  size_t pos_ = 0;
  int nesting_ = 0;  // open groups
  bool json_;
};

class SchemaConverter {
 public:
  SchemaConverter(const json& root, std::string prefix, std::string& gbnf)
      : root_(root), prefix_(std::move(prefix)), gbnf_(gbnf) {}

  std::string convert() { return visit(root_, prefix_ + "root", 0); }

 private:
  [[noreturn]] static void unsupported(const std::string& keyword) {
    fail(ErrorCode::kUnsupported, "unsupported JSON Schema keyword '{}'", keyword);
  }
  [[noreturn]] static void invalid(const std::string& what) {
    fail(ErrorCode::kInvalidArgument, "invalid JSON Schema: {}", what);
  }

  std::string add_rule(const std::string& base, const std::string& body) {
    const std::string name = reserve_rule(base);
    define_rule(name, body);
    return name;
  }

  // A rule name of its own from `base`, to define later (rules may refer to it before).
  std::string reserve_rule(const std::string& base) {
    std::string name;
    for (const char c : base) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (!used_.insert(name).second) {
      int i = 2;
      while (!used_.insert(fmt::format("{}-{}", name, i)).second) ++i;
      name = fmt::format("{}-{}", name, i);
    }
    return name;
  }

  void define_rule(const std::string& name, const std::string& body) {
    gbnf_ += fmt::format("\n{} ::= {}", name, body);
  }

  // Integer bounds of a schema: inclusive [lo, hi], rounded inward.
  static std::pair<std::optional<int64_t>, std::optional<int64_t>> int_bounds(const json& s) {
    std::optional<int64_t> lo, hi;
    auto num = [&](const char* key) -> std::optional<double> {
      const auto it = s.find(key);
      if (it == s.end()) return std::nullopt;
      if (!it->is_number()) invalid(fmt::format("'{}' must be a number", key));
      const double v = it->get<double>();
      if (std::abs(v) > 1e15) invalid(fmt::format("'{}' is out of range", key));
      return v;
    };
    if (auto v = num("minimum")) lo = static_cast<int64_t>(std::ceil(*v));
    if (auto v = num("exclusiveMinimum")) {
      const int64_t x = static_cast<int64_t>(std::floor(*v)) + 1;
      lo = lo ? std::max(*lo, x) : x;
    }
    if (auto v = num("maximum")) hi = static_cast<int64_t>(std::floor(*v));
    if (auto v = num("exclusiveMaximum")) {
      const int64_t x = static_cast<int64_t>(std::ceil(*v)) - 1;
      hi = hi ? std::min(*hi, x) : x;
    }
    if (lo && hi && *lo > *hi) invalid("minimum is above maximum");
    return {lo, hi};
  }

  static uint64_t read_count(const json& s, const char* key, uint64_t fallback) {
    const auto it = s.find(key);
    if (it == s.end()) return fallback;
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      invalid(fmt::format("'{}' must be a non-negative integer", key));
    }
    return std::min<uint64_t>(it->get<uint64_t>(), 4096);
  }

  std::string string_rule(const json& s, const std::string& name) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) invalid("'pattern' must be a string");
      const std::string pattern = s["pattern"].get<std::string>();
      const std::string translated = RegexTranslator(pattern, true).translate();
      // On its own first, so that an error names the pattern, not a rule made of it.
      try {
        check_cost(parse_gbnf("root ::= " + translated));
      } catch (const Error& e) {
        fail(e.code(), "'pattern' '{}': {}", pattern, e.what());
      }
      return add_rule(name, "\"\\\"\" " + translated + " \"\\\"\"");
    }
    if (s.contains("format")) {
      const std::string format = s["format"].is_string() ? s["format"].get<std::string>() : "";
      static const std::map<std::string, std::string> kFormats = {
          // Years 0001-9999; days that exist in their month (February up to 28: the grammar
          // does not know leap years).
          {"date", R"(([1-9] [0-9]{3} | "0" ([1-9] [0-9]{2} | "0" ([1-9] [0-9] | "0" [1-9]))) "-" )"
                   R"((("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | )"
                   R"(("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | )"
                   R"("02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))"},
          {"time",
           R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
          {"uuid",
           R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"}};
      std::string body;
      if (format == "date-time") {
        body = kFormats.at("date") + " \"T\" " + kFormats.at("time");
      } else if (kFormats.count(format)) {
        body = kFormats.at(format);
      } else {
        fail(ErrorCode::kUnsupported, "unsupported JSON Schema keyword 'format' value '{}'",
             format);
      }
      return add_rule(name, "\"\\\"\" " + body + " \"\\\"\"");
    }
    const uint64_t min = read_count(s, "minLength", 0);
    add_primitives(gbnf_);
    // Without maxLength the string stays one state per position kind (cheap masks).
    if (!s.contains("maxLength")) {
      return add_rule(name, fmt::format("\"\\\"\" json-char{{{},}} \"\\\"\"", min));
    }
    const uint64_t max = read_count(s, "maxLength", 0);
    if (min > max) invalid("minLength is above maxLength");
    return add_rule(name, fmt::format("\"\\\"\" json-char{{{},{}}} \"\\\"\"", min, max));
  }

  std::string number_rule(const json& s, const std::string& name, bool integer) {
    const auto [lo, hi] = int_bounds(s);
    add_primitives(gbnf_);
    if (!lo && !hi) return integer ? "json-int" : "json-number";
    const std::string ints = integer_range(lo, hi);
    if (integer) return add_rule(name, ints);
    // Decimals only where they stay in range: a non-negative integer part below the maximum.
    const int64_t frac_lo = std::max<int64_t>(lo.value_or(0), 0);
    std::string body = ints;
    if (!hi || *hi - 1 >= frac_lo) {
      body += " | " + integer_range(frac_lo, hi ? std::optional<int64_t>(*hi - 1) : std::nullopt) +
              " \".\" [0-9]{1,16}";
    }
    return add_rule(name, body);
  }

  std::string object_rule(const json& s, const std::string& name, int depth) {
    std::vector<std::string> required_names;
    if (s.contains("required")) {
      if (!s["required"].is_array()) invalid("'required' must be a list");
      for (const json& r : s["required"]) {
        if (!r.is_string()) invalid("'required' must list strings");
        required_names.push_back(r.get<std::string>());
      }
    }
    struct Member {
      std::string kv;  // "key": value
      bool required;
      bool repeated;  // additional properties: any number
    };
    std::vector<Member> members;  // in the schema's key order
    const std::set<std::string, std::less<>> required_set(required_names.begin(),
                                                          required_names.end());
    if (s.contains("properties")) {
      const json& props = s["properties"];
      if (!props.is_object()) invalid("'properties' must be an object");
      // Checked before visiting them: each costs rules and time.
      size_t optional = 0;
      for (auto it = props.begin(); it != props.end(); ++it)
        optional += !required_set.count(it.key());
      if (optional > kMaxOptionalProperties) {
        invalid(
            fmt::format("object '{}' has {} optional properties; at most {} (make some "
                        "required, or split the object)",
                        name, optional, kMaxOptionalProperties));
      }
      for (auto it = props.begin(); it != props.end(); ++it) {
        const std::string value = visit(it.value(), name + "-" + it.key(), depth + 1);
        const bool req = required_set.count(it.key()) > 0;
        members.push_back(
            {gbnf_literal(json(it.key()).dump()) + " \":\" json-ws " + value + " json-ws", req,
             false});
      }
    }
    for (const std::string& r : required_names) {
      if (!s.contains("properties") || !s["properties"].contains(r)) {
        invalid(fmt::format("required property '{}' is not in 'properties'", r));
      }
    }
    add_primitives(gbnf_);
    if (s.contains("additionalProperties")) {
      const json& extra = s["additionalProperties"];
      if (extra.is_object() || (extra.is_boolean() && extra.get<bool>())) {
        const std::string value =
            extra.is_object() ? visit(extra, name + "-additional", depth + 1) : "json-value";
        members.push_back(
            {add_rule(name + "-additional-kv", "json-string \":\" json-ws " + value + " json-ws"),
             false, true});
      } else if (!extra.is_boolean()) {
        invalid("'additionalProperties' must be a boolean or a schema");
      }
    }
    // The grammar is linear in the number of members (listing, for each possible first member,
    // the rest after it would be quadratic: 5000 optional properties made 300 MB of text):
    //   choice-i ::= m_i after-i | choice-(i+1)   the next member written is one of i.. up to
    //                                              the first required one (which can't be skipped)
    //   after-i  ::= "," ws choice-j | ""          once m_i is written (j = i + 1, or i for
    //                                              repeated additional properties; no "" while a
    //                                              required member is still to come)
    // Each expansion enters one member per optional property before a required one, which
    // is what kMaxOptionalProperties bounds (checked above).
    const size_t n = members.size();
    std::vector<bool> required_after(n + 1, false);  // a required member at index >= i
    for (size_t i = n; i-- > 0;) required_after[i] = required_after[i + 1] || members[i].required;
    std::vector<std::string> choice(n);
    for (size_t i = 0; i < n; ++i) choice[i] = reserve_rule(fmt::format("{}-choice-{}", name, i));
    for (size_t i = 0; i < n; ++i) {
      const Member& m = members[i];
      const size_t next = m.repeated ? i : i + 1;
      std::string member = m.kv;
      if (next < n) {
        const std::string more = "\",\" json-ws " + choice[next];
        member += required_after[i + 1] ? " " + more : " (" + more + ")?";
      }
      const bool skippable = !m.required && i + 1 < n;
      define_rule(choice[i], skippable ? member + " | " + choice[i + 1] : member);
    }
    std::string body = "\"{\" json-ws ";
    if (n > 0) body += required_after[0] ? choice[0] : "(" + choice[0] + ")?";
    return add_rule(name, body + " \"}\"");
  }

  std::string array_rule(const json& s, const std::string& name, int depth) {
    add_primitives(gbnf_);
    const uint64_t min = read_count(s, "minItems", 0);
    const uint64_t max = read_count(s, "maxItems", 4096);
    if (min > max) invalid("minItems is above maxItems");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) invalid("'prefixItems' must be a list");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        prefix.push_back(visit(s["prefixItems"][i], fmt::format("{}-{}", name, i), depth + 1));
      }
    }
    std::string item = "json-value";
    bool more = true;
    if (s.contains("items")) {
      if (s["items"].is_boolean())
        more = s["items"].get<bool>();
      else
        item = visit(s["items"], name + "-item", depth + 1);
    } else if (!prefix.empty()) {
      more = false;  // strict tuples: what tool schemas mean by prefixItems
    }
    // Every element is item; the first len(prefix) follow the tuple instead.
    std::vector<std::string> elems;
    for (const std::string& p : prefix) elems.push_back(p);
    const uint64_t fixed = prefix.size();
    if (fixed > max) invalid("more prefixItems than maxItems");
    std::string body = "\"[\" json-ws ";
    std::string seq;
    for (size_t i = 0; i < elems.size(); ++i)
      seq += (i ? " \",\" json-ws " : "") + elems[i] + " json-ws";
    if (!more) {
      if (min > fixed) invalid("minItems above the tuple length");
      // A tuple whose items are all required (min <= fixed: optional tail not modeled).
      body += seq;
    } else {
      const uint64_t rest_min = min > fixed ? min - fixed : 0;
      const uint64_t rest_max = max - fixed;
      const std::string element = add_rule(name + "-element", item + " json-ws");
      if (fixed > 0) {
        body += seq;
        if (rest_max > 0)
          body += fmt::format(" (\",\" json-ws {}){{{},{}}}", element, rest_min, rest_max);
      } else if (rest_max > 0) {
        const std::string list =
            rest_min > 0
                ? fmt::format("{} (\",\" json-ws {}){{{},{}}}", element, element, rest_min - 1,
                              rest_max - 1)
                : fmt::format("({} (\",\" json-ws {}){{0,{}}})?", element, element, rest_max - 1);
        body += list;
      }
    }
    return add_rule(name, body + " \"]\"");
  }

  std::string ref_rule(const std::string& ref, int depth) {
    const auto it = refs_.find(ref);
    if (it != refs_.end()) return it->second;
    std::string path;
    if (ref.starts_with("#/$defs/"))
      path = "$defs";
    else if (ref.starts_with("#/definitions/"))
      path = "definitions";
    else
      fail(ErrorCode::kUnsupported,
           "unsupported JSON Schema keyword '$ref' to '{}' (only #/$defs/ and #/definitions/)",
           ref);
    const std::string key = ref.substr(path.size() + 3);
    if (!root_.contains(path) || !root_[path].contains(key))
      invalid(fmt::format("'$ref' {} not found", ref));
    // The rule name is reserved before visiting, so recursive schemas refer to it.
    std::string name;
    for (const char c : prefix_ + "def-" + key)
      name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (!used_.insert(name).second) name += "-ref";
    used_.insert(name);
    refs_[ref] = name;
    const std::string body = visit(root_[path][key], name + "-body", depth + 1);
    gbnf_ += fmt::format("\n{} ::= {}", name, body);
    return name;
  }

  // The alternatives a schema's value may start with once nested anyOf / oneOf and type lists
  // are flattened ($ref not followed). Linear in the schema's size.
  static size_t count_alternatives(const json& s, int depth) {
    if (!s.is_object() || depth > 64) return 1;
    for (const char* key : {"anyOf", "oneOf"}) {
      const auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array()) return 1;
      size_t n = 0;
      for (const json& branch : *it) n += count_alternatives(branch, depth + 1);
      return n;
    }
    const auto type = s.find("type");
    return type != s.end() && type->is_array() ? std::max<size_t>(1, type->size()) : 1;
  }

  std::string visit(const json& s, const std::string& name, int depth) {
    if (depth > 64) invalid("nesting deeper than 64");
    if (s.is_boolean()) {
      if (!s.get<bool>()) invalid("schema 'false' accepts nothing");
      add_primitives(gbnf_);
      return "json-value";
    }
    if (!s.is_object()) invalid("a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!kSupported.count(it.key()) && !kAnnotations.count(it.key())) unsupported(it.key());
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) invalid("'$ref' must be a string");
      return ref_rule(s["$ref"].get<std::string>(), depth);
    }
    if (s.contains("const")) return add_rule(name, gbnf_literal(s["const"].dump()));
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) invalid("'enum' must be a non-empty list");
      std::vector<std::string> alts;
      for (const json& v : s["enum"]) alts.push_back(gbnf_literal(v.dump()));
      return add_rule(name, join(alts, " | "));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      if (!s[key].is_array() || s[key].empty())
        invalid(fmt::format("'{}' must be a non-empty list", key));
      // The matcher tries every alternative at once: nested anyOf multiply (a tree of 2^16
      // leaves is 65536 alternatives in 32 KB of schema). Checked before visiting them.
      if (const size_t n = count_alternatives(s, 0); n > kMaxAlternatives) {
        invalid(
            fmt::format("{} at '{}' has {} alternatives (nested anyOf, oneOf and type lists "
                        "counted); at most {}",
                        key, name, n, kMaxAlternatives));
      }
      // Sibling keywords (a shared "type" or "description") are merged into each branch.
      std::vector<std::string> alts;
      for (size_t i = 0; i < s[key].size(); ++i) {
        json branch = s[key][i];
        if (branch.is_object()) {
          for (auto it = s.begin(); it != s.end(); ++it) {
            if (it.key() != key && !kAnnotations.count(it.key()) && !branch.contains(it.key()))
              branch[it.key()] = it.value();
          }
        }
        alts.push_back(visit(branch, fmt::format("{}-{}", name, i), depth + 1));
      }
      return add_rule(name, join(alts, " | "));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string())
        types.push_back(s["type"].get<std::string>());
      else if (s["type"].is_array()) {
        for (const json& t : s["type"]) {
          if (!t.is_string()) invalid("'type' must be a string or a list of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        invalid("'type' must be a string or a list of strings");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
               s.contains("maxLength")) {
      types.push_back("string");
    } else {
      add_primitives(gbnf_);
      return "json-value";
    }
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      const std::string n = types.size() > 1 ? name + "-" + t : name;
      if (t == "object")
        alts.push_back(object_rule(s, n, depth));
      else if (t == "array")
        alts.push_back(array_rule(s, n, depth));
      else if (t == "string")
        alts.push_back(string_rule(s, n));
      else if (t == "integer")
        alts.push_back(number_rule(s, n, true));
      else if (t == "number")
        alts.push_back(number_rule(s, n, false));
      else if (t == "boolean") {
        add_primitives(gbnf_);
        alts.push_back("json-boolean");
      } else if (t == "null") {
        add_primitives(gbnf_);
        alts.push_back("json-null");
      } else
        invalid(fmt::format("unknown type '{}'", t));
    }
    return alts.size() == 1 ? alts[0] : add_rule(name, join(alts, " | "));
  }

  const json& root_;
  std::string prefix_;
  std::string& gbnf_;
  std::set<std::string> used_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02X}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_object_gbnf() {
  std::string gbnf = "root ::= json-object";
  add_primitives(gbnf);
  return gbnf;
}

std::string add_json_schema_rules(const json& schema, const std::string& prefix,
                                  std::string& gbnf) {
  return SchemaConverter(schema, prefix, gbnf).convert();
}

std::string json_schema_gbnf(const json& schema) {
  std::string rules;
  const std::string top = add_json_schema_rules(schema, "schema-", rules);
  return "root ::= " + top + rules;
}

std::string regex_gbnf(std::string_view pattern) {
  return "root ::= " + RegexTranslator(pattern, false).translate();
}

std::string choice_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) fail(ErrorCode::kInvalidArgument, "guided_choice: the list is empty");
  std::vector<std::string> alts;
  for (const std::string& c : choices) alts.push_back(gbnf_literal(c));
  return "root ::= " + join(alts, " | ");
}

}  // namespace rapide::grammar
