#include "grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <utility>

#include "base/error.h"
#include "tokenizer/utf8.h"

namespace rapide::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kFirstSurrogate = 0xD800, kLastSurrogate = 0xDFFF;
// Repetition counts beyond this are refused: {m,n} unrolls into n copies.
constexpr uint32_t kMaxRepeat = 10000;
// What repetitions may unroll into, in elements (about 40 bytes each) and helper rules: a
// request's grammar is untrusted, and `x{0,10000}` written a thousand times would otherwise
// ask for tens of millions of rules.
constexpr uint64_t kMaxUnrolled = uint64_t{1} << 18;
// Parentheses nest at most this deep: the parser recurses once per level.
constexpr int kMaxNesting = 256;

struct CodeRange {
  uint32_t lo, hi;
};

// The UTF-8 byte-range sequences of code points lo..hi (RE2's / Go's utf8 range split): each
// output sequence lists, per byte, the range that byte may take.
void utf8_sequences(uint32_t lo, uint32_t hi,
                    std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  static constexpr uint32_t kMaxOfLength[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (const uint32_t max : kMaxOfLength) {
    if (lo <= max && max < hi) {
      utf8_sequences(lo, max, out);
      utf8_sequences(max + 1, hi, out);
      return;
    }
  }
  std::string a, b;
  utf8::append_code_point(a, lo);
  utf8::append_code_point(b, hi);
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t i = 0; i < n; ++i) {
    seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  }
  out.push_back(std::move(seq));
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Grammar parse() {
    skip_space(true);
    while (pos_ < text_.size()) {
      const std::string name = parse_name();
      skip_space(false);
      if (text_.substr(pos_, 3) != "::=") error("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const uint32_t r = rule_index(name);
      if (defined_[r]) error("rule '" + name + "' is defined twice");
      defined_[r] = true;
      rules_[r].alternatives = parse_alternatives(name, false);
      skip_space(true);
    }
    return Grammar::compile(std::move(rules_), "root");
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) line += text_[i] == '\n';
    fail(ErrorCode::kInvalidArgument, "grammar: line {}: {}", line, what);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) error(fmt::format("expected a rule name at '{}'", text_.substr(pos_, 10)));
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t rule_index(const std::string& name) {
    auto [it, inserted] = names_.emplace(name, static_cast<uint32_t>(rules_.size()));
    if (inserted) {
      rules_.push_back({name, {}, {}});
      defined_.push_back(false);
    }
    return it->second;
  }

  // `origin`: what the rule stands for, as written (RuleDef::origin).
  uint32_t helper_rule(const std::string& base, std::vector<Alternative> alternatives,
                       std::string origin) {
    const uint32_t r = static_cast<uint32_t>(rules_.size());
    rules_.push_back({fmt::format("{}_{}", base, r), std::move(alternatives), std::move(origin)});
    defined_.push_back(true);
    return r;
  }

  // "what 'text' in rule 'name'", the text cut short and on one line.
  static std::string origin(std::string_view what, std::string_view text,
                            const std::string& rule_name) {
    constexpr size_t kMaxText = 48;
    std::string shown(text.substr(0, kMaxText));
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    if (text.size() > kMaxText) shown += "...";
    return fmt::format("{} '{}' in rule '{}'", what, shown, rule_name);
  }

  uint32_t parse_hex(size_t digits) {
    uint32_t value = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<uint32_t>(c - 'A' + 10);
      else
        error("bad hex escape");
      value = value * 16 + d;
      ++pos_;
    }
    return value;
  }

  // What an escape names must be a Unicode scalar value: a code point above U+10FFFF or a
  // surrogate has no UTF-8 encoding, and the grammar would emit bytes that decode to U+FFFD.
  // `escape` is the escape as written (\U7FFFFFFF), for the message.
  uint32_t scalar_value(uint32_t cp, std::string_view escape) const {
    if (cp > kMaxCodePoint) {
      error(fmt::format("escape {} is beyond U+10FFFF, the last Unicode code point", escape));
    }
    if (cp >= kFirstSurrogate && cp <= kLastSurrogate) {
      error(fmt::format("escape {} is a UTF-16 surrogate, not a character", escape));
    }
    return cp;
  }

  // One code point of a literal or class, escapes decoded; always a Unicode scalar value.
  uint32_t parse_char() {
    if (at_end()) error("unexpected end of grammar");
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '0':
          return 0;
        case 'x':
          return parse_hex(2);
        case 'u':
        case 'U': {
          const size_t start = pos_ - 2;
          const uint32_t cp = parse_hex(e == 'u' ? 4 : 8);
          return scalar_value(cp, text_.substr(start, pos_ - start));
        }
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return static_cast<uint32_t>(e);
        default:
          error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    // A UTF-8 character of the grammar text itself. Strictly valid only: a broken sequence
    // would otherwise decode to some code point (or to one above U+10FFFF) that the grammar
    // then emits as bytes no UTF-8 decoder accepts.
    const utf8::CharCheck check = utf8::check_char(text_.substr(pos_));
    if (check.status != utf8::CharStatus::kComplete) error("grammar text is not valid UTF-8");
    const size_t length = check.length;
    uint32_t cp = length == 1 ? c : c & (0xFF >> (length + 1));
    for (size_t i = 1; i < length; ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(text_[pos_ + i]) & 0x3F);
    pos_ += length;
    return cp;
  }

  // Code point ranges -> one element (ASCII only) or a helper rule of UTF-8 alternatives.
  Element class_element(const std::vector<CodeRange>& ranges, std::string origin) {
    ByteSet ascii;
    std::vector<Alternative> alternatives;
    for (const CodeRange& r : ranges) {
      if (r.lo <= 0x7F)
        ascii.add_range(static_cast<uint8_t>(r.lo),
                        static_cast<uint8_t>(std::min<uint32_t>(r.hi, 0x7F)));
      if (r.hi < 0x80) continue;
      std::vector<std::vector<std::pair<uint8_t, uint8_t>>> sequences;
      utf8_sequences(std::max<uint32_t>(r.lo, 0x80), r.hi, sequences);
      for (const auto& seq : sequences) {
        Alternative alt;
        for (const auto& [lo, hi] : seq) {
          ByteSet set;
          set.add_range(lo, hi);
          alt.push_back(bytes_element(set));
        }
        alternatives.push_back(std::move(alt));
      }
    }
    if (alternatives.empty()) {
      if (ascii.empty()) error("empty character class");
      return bytes_element(ascii);
    }
    if (!ascii.empty())
      alternatives.insert(alternatives.begin(), Alternative{bytes_element(ascii)});
    return rule_element(helper_rule("class", std::move(alternatives), std::move(origin)));
  }

  static std::vector<CodeRange> complement(std::vector<CodeRange> ranges) {
    std::sort(ranges.begin(), ranges.end(),
              [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
    std::vector<CodeRange> out;
    uint32_t next = 0;
    for (const CodeRange& r : ranges) {
      if (r.lo > next) out.push_back({next, r.lo - 1});
      next = std::max(next, r.hi + 1);
    }
    if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
    return out;
  }

  // Any code point but surrogates.
  static std::vector<CodeRange> any_char() { return {{0, 0xD7FF}, {0xE000, kMaxCodePoint}}; }

  Element parse_class(const std::string& rule_name) {
    const size_t start = pos_;
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodeRange> ranges;
    while (!at_end() && text_[pos_] != ']') {
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) error("character range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    if (at_end()) error("unterminated character class");
    ++pos_;  // ']'
    if (negated) ranges = complement(std::move(ranges));
    {
      // Surrogates are not characters: a range that spans them ([\u0000-\uFFFF], or any
      // negated class) matches the scalar values on either side only.
      std::vector<CodeRange> clipped;
      for (const CodeRange& r : ranges) {
        for (const CodeRange& allowed : any_char()) {
          const uint32_t lo = std::max(r.lo, allowed.lo), hi = std::min(r.hi, allowed.hi);
          if (lo <= hi) clipped.push_back({lo, hi});
        }
      }
      ranges = std::move(clipped);
    }
    return class_element(ranges,
                         origin("character class", text_.substr(start, pos_ - start), rule_name));
  }

  void parse_literal(Alternative& out) {
    ++pos_;  // '"'
    while (!at_end() && text_[pos_] != '"') {
      std::string bytes;
      utf8::append_code_point(bytes, parse_char());
      for (const char b : bytes) out.push_back(byte_element(static_cast<uint8_t>(b)));
    }
    if (at_end()) error("unterminated literal");
    ++pos_;
  }

  uint32_t parse_count() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (value > kMaxRepeat) error(fmt::format("repetition count above {}", kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) error("expected a number in a repetition");
    return static_cast<uint32_t>(value);
  }

  // Replaces the last term of `seq` (from index `start`) by its repetition min..max
  // (max < 0: unbounded), as llama.cpp's handle_repetitions does. `text` is the repetition
  // as written: its helper rules carry it, and two or more fixed copies go into a rule of
  // their own so that an error can name them (cost.h).
  void repeat(const std::string& rule_name, Alternative& seq, size_t start, uint32_t min,
              int64_t max, std::string_view text) {
    if (start == seq.size()) error("repetition without a term");
    Alternative term(seq.begin() + static_cast<std::ptrdiff_t>(start), seq.end());
    const uint64_t copies = min + (max < 0 ? 1 : static_cast<uint64_t>(max - min));
    unrolled_ += copies * (term.size() + 1);
    if (unrolled_ > kMaxUnrolled) {
      error(fmt::format("repetitions unroll into more than {} elements", kMaxUnrolled));
    }
    const std::string what = origin("repetition", text, rule_name);
    seq.resize(start);
    Alternative fixed;  // the copies' own rule, for two or more
    Alternative& out = min >= 2 ? fixed : seq;
    for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), term.begin(), term.end());
    if (max < 0) {
      // star ::= term star | (empty)
      const uint32_t star = helper_rule(rule_name, {}, what);
      Alternative loop = term;
      loop.push_back(rule_element(star));
      rules_[star].alternatives = {std::move(loop), {}};
      out.push_back(rule_element(star));
    } else if (max > min) {
      // opt_k ::= term opt_{k-1} | (empty), nested (max - min) deep.
      const int64_t optional = max - min;
      uint32_t inner = helper_rule(rule_name, {term, {}}, what);
      for (int64_t k = 1; k < optional; ++k) {
        Alternative alt = term;
        alt.push_back(rule_element(inner));
        inner = helper_rule(rule_name, {std::move(alt), {}}, what);
      }
      out.push_back(rule_element(inner));
    }
    if (min >= 2) {
      std::vector<Alternative> alternatives;
      alternatives.push_back(std::move(fixed));
      seq.push_back(rule_element(helper_rule(rule_name, std::move(alternatives), what)));
    }
  }

  Alternative parse_sequence(const std::string& rule_name, bool nested) {
    Alternative seq;
    size_t last_start = 0;
    size_t last_text = pos_;  // where the last term starts in the text
    while (!at_end()) {
      const char c = peek();
      if (c != '*' && c != '+' && c != '?' && c != '{') last_text = pos_;
      if (c == '"') {
        last_start = seq.size();
        parse_literal(seq);
      } else if (c == '[') {
        last_start = seq.size();
        seq.push_back(parse_class(rule_name));
      } else if (c == '.') {
        ++pos_;
        last_start = seq.size();
        seq.push_back(class_element(any_char(), origin("any character", ".", rule_name)));
      } else if (c == '(') {
        if (++nesting_ > kMaxNesting)
          error(fmt::format("groups nested deeper than {}", kMaxNesting));
        ++pos_;
        skip_space(true);
        std::vector<Alternative> alternatives = parse_alternatives(rule_name, true);
        if (peek() != ')') error("expected ')'");
        ++pos_;
        --nesting_;
        last_start = seq.size();
        seq.push_back(rule_element(
            helper_rule(rule_name, std::move(alternatives),
                        origin("group", text_.substr(last_text, pos_ - last_text), rule_name))));
      } else if (is_name_char(c)) {
        const size_t save = pos_;
        const std::string name = parse_name();
        skip_space(false);
        if (text_.substr(pos_, 3) == "::=") {  // the next rule starts: this sequence ended
          pos_ = save;
          break;
        }
        pos_ = save + name.size();
        last_start = seq.size();
        seq.push_back(rule_element(rule_index(name)));
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        repeat(rule_name, seq, last_start, c == '+' ? 1 : 0, c == '?' ? 1 : -1,
               text_.substr(last_text, pos_ - last_text));
      } else if (c == '{') {
        ++pos_;
        skip_space(false);
        const uint32_t min = parse_count();
        skip_space(false);
        int64_t max = min;
        if (peek() == ',') {
          ++pos_;
          skip_space(false);
          max = peek() == '}' ? int64_t{-1} : int64_t{parse_count()};
          skip_space(false);
        }
        if (peek() != '}') error("expected '}'");
        ++pos_;
        if (max >= 0 && max < min) error("repetition {m,n} with n < m");
        repeat(rule_name, seq, last_start, min, max, text_.substr(last_text, pos_ - last_text));
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  std::vector<Alternative> parse_alternatives(const std::string& rule_name, bool nested) {
    std::vector<Alternative> alternatives;
    alternatives.push_back(parse_sequence(rule_name, nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(rule_name, nested));
    }
    if (!nested && !at_end() && peek() != '\n' && !is_name_char(peek())) {
      error(fmt::format("unexpected '{}'", peek()));
    }
    return alternatives;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int nesting_ = 0;        // open parentheses
  uint64_t unrolled_ = 0;  // elements and helper rules the repetitions made so far
  std::vector<RuleDef> rules_;
  std::vector<bool> defined_;
  std::map<std::string, uint32_t> names_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) {
  return Parser(text).parse();
}

}  // namespace rapide::grammar
