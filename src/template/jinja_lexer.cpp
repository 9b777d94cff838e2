#include "template/jinja_lexer.h"

#include <cctype>

#include "base/error.h"
#include "template/jinja_value.h"

namespace rapide::jinja {
namespace {

bool is_regex_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string rstrip_text(const std::string& s) {
  return python_strip(s, "", false, true);
}

// Python's "unicode-escape" decoding, which jinja2 applies to string literals.
std::string decode_string_literal(std::string_view body) {
  std::u32string in = utf8_to_u32(body);
  std::u32string out;
  auto hex_value = [&](size_t start, size_t count, char32_t& value) {
    if (start + count > in.size()) return false;
    value = 0;
    for (size_t k = 0; k < count; ++k) {
      char32_t c = in[start + k];
      int digit = c >= U'0' && c <= U'9'   ? static_cast<int>(c - U'0')
                  : c >= U'a' && c <= U'f' ? static_cast<int>(c - U'a' + 10)
                  : c >= U'A' && c <= U'F' ? static_cast<int>(c - U'A' + 10)
                                           : -1;
      if (digit < 0) return false;
      value = value * 16 + static_cast<char32_t>(digit);
    }
    return true;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != U'\\' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    char32_t e = in[++i];
    char32_t value = 0;
    switch (e) {
      case U'\n':
        break;
      case U'\\':
      case U'\'':
      case U'"':
        out += e;
        break;
      case U'a':
        out += U'\a';
        break;
      case U'b':
        out += U'\b';
        break;
      case U'f':
        out += U'\f';
        break;
      case U'n':
        out += U'\n';
        break;
      case U'r':
        out += U'\r';
        break;
      case U't':
        out += U'\t';
        break;
      case U'v':
        out += U'\v';
        break;
      case U'x':
      case U'u':
      case U'U': {
        size_t count = e == U'x' ? 2 : e == U'u' ? 4 : 8;
        if (!hex_value(i + 1, count, value))
          fail(ErrorCode::kInvalidArgument, "truncated \\{} escape", char(e));
        out += value;
        i += count;
        break;
      }
      default:
        if (e >= U'0' && e <= U'7') {
          size_t k = 0;
          while (k < 3 && i + k < in.size() && in[i + k] >= U'0' && in[i + k] <= U'7') {
            value = value * 8 + (in[i + k] - U'0');
            ++k;
          }
          out += value;
          i += k - 1;
        } else {
          out += U'\\';
          out += e;
        }
    }
  }
  return u32_to_utf8(out);
}

class Lexer {
 public:
  explicit Lexer(std::string source) { result_.source = std::move(source); }

  LexedTemplate run() {
    const std::string& s = result_.source;
    while (pos_ < s.size()) {
      size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit(Token::Type::kText, s.substr(pos_), pos_);
        break;
      }
      char kind = s[tag + 1];
      char sign = tag + 2 < s.size() && (s[tag + 2] == '-' || s[tag + 2] == '+') ? s[tag + 2] : 0;
      std::string text = s.substr(pos_, tag - pos_);
      if (sign == '-') {
        text = rstrip_text(text);
      } else if (sign != '+' && kind != '{') {
        text = lstrip_block_indent(text);
      }
      if (!text.empty()) emit(Token::Type::kText, text, pos_);
      pos_ = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        lex_comment(tag);
      } else if (kind == '%' && lex_raw(tag)) {
        continue;
      } else {
        lex_tag(kind, tag);
      }
    }
    emit(Token::Type::kEnd, "", s.size());
    return std::move(result_);
  }

 private:
  size_t find_tag(size_t from) const {
    const std::string& s = result_.source;
    for (size_t p = s.find('{', from); p != std::string::npos; p = s.find('{', p + 1)) {
      if (p + 1 < s.size() && (s[p + 1] == '{' || s[p + 1] == '%' || s[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  // lstrip_blocks: indentation between a line start and a block or comment tag is dropped.
  std::string lstrip_block_indent(const std::string& text) const {
    size_t newline = text.rfind('\n');
    size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (line_start == 0 && !line_starting_) return text;
    if (line_start == text.size()) return text;
    for (size_t i = line_start; i < text.size(); ++i) {
      if (!is_regex_space(text[i])) return text;
    }
    return text.substr(0, line_start);
  }

  // After a closing tag: "-" strips all following whitespace; trim_blocks drops one newline.
  void finish_tag(bool strip_after, bool trim_newline) {
    const std::string& s = result_.source;
    size_t start = pos_;
    if (strip_after) {
      while (pos_ < s.size() && is_regex_space(s[pos_])) ++pos_;
    } else if (trim_newline && pos_ < s.size() && s[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > start ? s[pos_ - 1] == '\n' : false;
  }

  void lex_comment(size_t tag) {
    const std::string& s = result_.source;
    size_t end = s.find("#}", pos_);
    if (end == std::string::npos) error(tag, "missing end of comment tag");
    bool strip_after = end > pos_ && s[end - 1] == '-';
    pos_ = end + 2;
    finish_tag(strip_after, true);
  }

  // {% raw %}...{% endraw %} keeps its content as text.
  bool lex_raw(size_t tag) {
    const std::string& s = result_.source;
    size_t p = pos_;
    while (p < s.size() && is_regex_space(s[p])) ++p;
    if (s.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < s.size() && is_regex_space(s[p])) ++p;
    bool strip_after = p < s.size() && s[p] == '-';
    if (strip_after) ++p;
    if (s.compare(p, 2, "%}") != 0) return false;
    p += 2;
    if (strip_after) {
      while (p < s.size() && is_regex_space(s[p])) ++p;
    }
    for (size_t q = s.find("{%", p); q != std::string::npos; q = s.find("{%", q + 2)) {
      size_t r = q + 2;
      char sign = r < s.size() && (s[r] == '-' || s[r] == '+') ? s[r] : 0;
      if (sign) ++r;
      while (r < s.size() && is_regex_space(s[r])) ++r;
      if (s.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < s.size() && is_regex_space(s[r])) ++r;
      char end_sign = r < s.size() && (s[r] == '-' || s[r] == '+') ? s[r] : 0;
      if (end_sign) ++r;
      if (s.compare(r, 2, "%}") != 0) continue;
      std::string text = s.substr(p, q - p);
      line_starting_ = false;
      if (sign == '-') {
        text = rstrip_text(text);
      } else if (sign != '+') {
        text = lstrip_block_indent(text);
      }
      if (!text.empty()) emit(Token::Type::kText, text, p);
      pos_ = r + 2;
      finish_tag(end_sign == '-', end_sign != '+');
      return true;
    }
    error(tag, "missing end of raw directive");
  }

  void lex_tag(char kind, size_t tag) {
    const std::string& s = result_.source;
    bool is_block = kind == '%';
    emit(is_block ? Token::Type::kBlockBegin : Token::Type::kVarBegin, "", tag);
    const char close = is_block ? '%' : '}';
    std::vector<char> brackets;
    while (true) {
      while (pos_ < s.size() && is_regex_space(s[pos_])) ++pos_;
      if (pos_ >= s.size())
        error(tag, is_block ? "unexpected end of template inside a block tag"
                            : "unexpected end of template inside a variable tag");
      if (brackets.empty()) {
        char sign = s[pos_] == '-' || (is_block && s[pos_] == '+') ? s[pos_] : 0;
        size_t q = pos_ + (sign ? 1 : 0);
        if (q + 1 < s.size() && s[q] == close && s[q + 1] == '}') {
          emit(is_block ? Token::Type::kBlockEnd : Token::Type::kVarEnd, "", pos_);
          pos_ = q + 2;
          finish_tag(sign == '-', is_block && sign != '+');
          return;
        }
      }
      lex_expression_token(brackets);
    }
  }

  void lex_expression_token(std::vector<char>& brackets) {
    const std::string& s = result_.source;
    size_t start = pos_;
    char c = s[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[pos_])) || s[pos_] == '_'))
        ++pos_;
      emit(Token::Type::kName, s.substr(start, pos_ - start), start);
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number();
      return;
    }
    if (c == '\'' || c == '"') {
      ++pos_;
      while (pos_ < s.size() && s[pos_] != c) pos_ += s[pos_] == '\\' ? 2 : 1;
      if (pos_ >= s.size()) error(start, "unterminated string");
      ++pos_;
      emit(Token::Type::kString,
           decode_string_literal(std::string_view(s).substr(start + 1, pos_ - start - 2)), start);
      return;
    }
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (s.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        emit(Token::Type::kOperator, op, start);
        return;
      }
    }
    if (std::string_view("+-*/%~<>()[]{},.:|=;").find(c) == std::string_view::npos) {
      error(start, fmt::format("unexpected char '{}'", c));
    }
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) error(start, fmt::format("unexpected '{}'", c));
      if (brackets.back() != c)
        error(start, fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
      brackets.pop_back();
    }
    ++pos_;
    emit(Token::Type::kOperator, std::string(1, c), start);
  }

  void lex_number() {
    const std::string& s = result_.source;
    size_t start = pos_;
    auto digits = [&] {
      while (pos_ < s.size() &&
             (std::isdigit(static_cast<unsigned char>(s[pos_])) || s[pos_] == '_'))
        ++pos_;
    };
    digits();
    bool is_float = false;
    // A float cannot follow "." (x.0.1 is two item lookups, as in jinja2).
    bool after_dot = !result_.tokens.empty() &&
                     result_.tokens.back().type == Token::Type::kOperator &&
                     result_.tokens.back().text == ".";
    if (!after_dot && pos_ + 1 < s.size() && s[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(s[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (!after_dot && pos_ < s.size() && (s[pos_] == 'e' || s[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < s.size() && (s[q] == '+' || s[q] == '-')) ++q;
      if (q < s.size() && std::isdigit(static_cast<unsigned char>(s[q]))) {
        is_float = true;
        pos_ = q;
        digits();
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i) {
      if (s[i] != '_') text += s[i];
    }
    emit(is_float ? Token::Type::kFloat : Token::Type::kInt, text, start);
  }

  void emit(Token::Type type, std::string text, size_t offset) {
    result_.tokens.push_back(Token{type, std::move(text), offset});
  }

  [[noreturn]] void error(size_t offset, const std::string& message) const {
    fail(ErrorCode::kInvalidArgument, "chat template syntax error at {}: {}",
         describe_position(result_.source, offset), message);
  }

  LexedTemplate result_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

LexedTemplate lex_template(std::string_view source) {
  // jinja2 treats \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False).
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(std::move(normalized)).run();
}

std::string describe_position(const std::string& source, size_t offset) {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return fmt::format("line {}, column {}", line, offset - line_start + 1);
}

}  // namespace rapide::jinja
