#include "engine/prefix_miss_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

namespace rapide {

namespace {

// Characters (UTF-8 code points) kept before the divergence in the summary.
constexpr size_t kBeforeCharacters = 24;

size_t count_characters(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// The last `n` characters of s, not splitting a UTF-8 sequence.
std::string last_characters(const std::string& s, size_t n) {
  size_t start = s.size();
  size_t seen = 0;
  while (start > 0 && seen < n) {
    --start;
    if ((static_cast<unsigned char>(s[start]) & 0xC0) != 0x80) ++seen;
  }
  return s.substr(start);
}

// Thousands separators, as people read counts: 1,980.
std::string with_commas(size_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Control characters (newlines, NUL from byte tokens) would break the one-line summary.
std::string one_line(std::string s) {
  for (char& c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = ' ';
  }
  return s;
}

}  // namespace

PrefixMissRecord describe_miss(const PrefixDivergence& d, const Tokenizer& tokenizer) {
  PrefixMissRecord r;
  r.request_id = d.request_id;
  r.prompt_tokens = d.prompt_tokens;
  r.reused_tokens = d.reused_tokens;
  r.matched_tokens = d.matched_tokens;
  r.divergent_position = d.matched_tokens;
  const std::string common = tokenizer.decode(d.common);
  r.same_characters = static_cast<int>(count_characters(common));
  r.before = last_characters(common, kBeforeCharacters);
  // Decoded as continuations: a leading space is real text here.
  r.prompt_text = tokenizer.decode(d.prompt_after, /*skip_leading_space=*/false);
  r.cached_text = tokenizer.decode(d.cached_after, /*skip_leading_space=*/false);
  r.realigned = d.prompt_differs >= 0 && d.cached_differs >= 0;
  if (r.realigned) {
    const auto value = [&tokenizer](const std::vector<int32_t>& after, int n) {
      const size_t end = std::min(after.size(), static_cast<size_t>(n));
      return tokenizer.decode(std::span<const int32_t>(after).first(end),
                              /*skip_leading_space=*/false);
    };
    r.prompt_value = value(d.prompt_after, d.prompt_differs);
    r.cached_value = value(d.cached_after, d.cached_differs);
  }
  r.summary = fmt::format(
      "reused {} of {} prompt tokens; same {} characters ({} tokens), then `...{}{}` vs cached "
      "`...{}{}`",
      r.reused_tokens, r.prompt_tokens, with_commas(r.same_characters), r.matched_tokens,
      one_line(r.before), one_line(r.prompt_text), one_line(r.before), one_line(r.cached_text));
  if (r.realigned) {
    r.summary += fmt::format("; the values `{}` vs `{}`", one_line(r.prompt_value),
                             one_line(r.cached_value));
  }
  return r;
}

}  // namespace rapide
