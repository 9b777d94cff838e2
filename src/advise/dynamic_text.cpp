#include "advise/dynamic_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>

namespace rapide::advise {

namespace {

bool is_id_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-' ||
         c == ':' || c == 'T' || c == 'Z' || c == '.' || c == '+';
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Whether the text at the difference starts a JSON key ("name":), or sits inside one.
bool at_json_key(std::string_view before, std::string_view side) {
  static const std::regex key(R"(^[A-Za-z0-9_\-]*"\s*:)");
  const size_t quote = before.rfind('"');
  const bool inside = quote != std::string_view::npos &&
                      before.find_first_of(":,", quote) == std::string_view::npos && quote > 0 &&
                      (before[quote - 1] == '{' || before[quote - 1] == ',' ||
                       before[quote - 1] == ' ' || before[quote - 1] == '\n');
  const std::string s(side.substr(0, 64));
  if (inside) return std::regex_search(s, key);
  return std::regex_search(s, std::regex(R"(^\s*"[A-Za-z0-9_\-]*"\s*:)"));
}

}  // namespace

const char* dynamic_kind_name(DynamicKind kind) {
  switch (kind) {
    case DynamicKind::kTimestamp:
      return "timestamp";
    case DynamicKind::kIdentifier:
      return "identifier";
    case DynamicKind::kNumber:
      return "counter";
    case DynamicKind::kKeyOrder:
      return "JSON key order";
    case DynamicKind::kWhitespace:
      return "whitespace";
    case DynamicKind::kText:
      return "user data";
  }
  return "text";
}

const char* dynamic_kind_fix(DynamicKind kind) {
  switch (kind) {
    case DynamicKind::kTimestamp:
    case DynamicKind::kIdentifier:
    case DynamicKind::kNumber:
    case DynamicKind::kText:
      return "move it after the static content (system prompt, tools, documents)";
    case DynamicKind::kKeyOrder:
      return "serialise JSON with sorted keys (non-deterministic serialization)";
    case DynamicKind::kWhitespace:
      return "normalise whitespace and Unicode (NFC) before building the prompt";
  }
  return "";
}

std::string difference_token(std::string_view before, std::string_view a) {
  // An id-like run (digits, hex, date and time punctuation) with a digit in it: the value.
  size_t start = before.size();
  while (start > 0 && is_id_char(before[start - 1])) start--;
  size_t end = 0;
  while (end < a.size() && is_id_char(a[end])) end++;
  std::string token(before.substr(start));
  token.append(a.substr(0, end));
  if (token.find_first_of("0123456789") != std::string::npos) return token;
  // Otherwise the word around the difference.
  start = before.size();
  while (start > 0 && !is_space(before[start - 1]) && before.size() - start < 24) start--;
  end = 0;
  while (end < a.size() && end < 24 && !is_space(a[end])) end++;
  token.assign(before.substr(start));
  token.append(a.substr(0, std::max<size_t>(end, 1)));
  return token;
}

namespace {

// Word and id characters: what a value is made of (letters, digits, the punctuation of
// dates, times, UUIDs and paths), never spaces or quotes. UTF-8 continuation and lead bytes
// count as letters.
bool is_value_char(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return u >= 0x80 || std::isalnum(u) || c == '-' || c == ':' || c == '.' || c == '_' || c == '+' ||
         c == '/';
}

}  // namespace

DifferingValues widen_values(std::string_view before, std::string_view a, size_t a_len,
                             std::string_view b, size_t b_len) {
  a_len = std::min(a_len, a.size());
  b_len = std::min(b_len, b.size());
  size_t start = before.size();
  while (start > 0 && is_value_char(before[start - 1])) start--;
  // A difference that starts or ends inside a word takes the whole word; one that is only
  // spaces or punctuation stays as it is.
  const std::string_view lead = before.substr(start);
  // Each side goes on to the end of its word: the shared text after the values may start
  // inside it, and a value may even end in a character that differs again (`...3f40` vs
  // `...3f41` realign on `-4c1d-...-3f4`). Sentence punctuation does not end a value.
  const auto word_end = [](std::string_view side, size_t from) {
    size_t end = from;
    while (end < side.size() && is_value_char(side[end])) end++;
    while (end > from && (side[end - 1] == '.' || side[end - 1] == ':' || side[end - 1] == '-'))
      end--;
    return end;
  };
  const bool word_a = a_len > 0 && is_value_char(a[0]);
  const bool word_b = b_len > 0 && is_value_char(b[0]);
  DifferingValues v;
  v.a = std::string(word_a || word_b ? lead : std::string_view()) + std::string(a.substr(0, a_len));
  v.b = std::string(word_a || word_b ? lead : std::string_view()) + std::string(b.substr(0, b_len));
  const bool end_a = a_len > 0 && is_value_char(a[a_len - 1]);
  const bool end_b = b_len > 0 && is_value_char(b[b_len - 1]);
  if (end_a || end_b) {
    v.a += a.substr(a_len, word_end(a, a_len) - a_len);
    v.b += b.substr(b_len, word_end(b, b_len) - b_len);
  }
  return v;
}

std::string show_value(std::string_view value, size_t max_characters) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (out.size() >= max_characters) {
      // Not inside a UTF-8 sequence.
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
        out.pop_back();
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
      return out + "...";
    }
    const char c = value[i];
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (value.substr(i, 2) == "\xC2\xA0") {
      out += "\\u00a0";
      ++i;
    } else if (value.substr(i, 3) == "\xE2\x80\x8B") {
      out += "\\u200b";
      i += 2;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

DynamicKind classify_difference(std::string_view before, std::string_view a, std::string_view b) {
  // Whitespace: the sides agree once runs of spaces are skipped at the difference.
  size_t i = 0, j = 0;
  while (i < a.size() && is_space(a[i])) i++;
  while (j < b.size() && is_space(b[j])) j++;
  if ((i > 0 || j > 0) && a.substr(i, 16) == b.substr(j, 16)) return DynamicKind::kWhitespace;
  if (at_json_key(before, a) && at_json_key(before, b)) return DynamicKind::kKeyOrder;
  const std::string token = difference_token(before, a);
  static const std::regex date(
      R"(\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(:\d{2})?|\d{1,2}/\d{1,2}/\d{2,4})");
  static const std::regex uuid(R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-|[0-9a-fA-F]{12,}|\d{7,})");
  static const std::regex number(R"(^\d{1,6}$)");
  if (std::regex_search(token, date)) return DynamicKind::kTimestamp;
  if (std::regex_search(token, uuid)) return DynamicKind::kIdentifier;
  if (std::regex_search(token, number)) return DynamicKind::kNumber;
  return DynamicKind::kText;
}

}  // namespace rapide::advise
