#include "advise/dynamic_text.h"

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
