// What kind of text differs between two prompts that are otherwise the same: the cause the
// advisor names for a prefix-cache near miss and the prompt lint for a cache-hostile field.
// The kinds are the usual culprits: a clock (dates, times), an identifier (UUIDs, long hex
// or digit runs), a counter, a JSON object serialised with its keys in another order, and
// whitespace or Unicode forms of the same text.
#pragma once

#include <string>
#include <string_view>

namespace rapide::advise {

enum class DynamicKind {
  kTimestamp,   // 2026-11-29, 10:04:11, 2026-11-29T10:04:11Z
  kIdentifier,  // UUIDs, long hex or digit runs
  kNumber,      // a short counter or number
  kKeyOrder,    // "key": at the difference on both sides, different keys
  kWhitespace,  // only spaces, tabs or newlines differ
  kText,        // anything else (user data)
};

const char* dynamic_kind_name(DynamicKind kind);
// What a reader should do about it (one sentence).
const char* dynamic_kind_fix(DynamicKind kind);

// `before`: the text just before the difference; `a`, `b`: each side from the difference on.
DynamicKind classify_difference(std::string_view before, std::string_view a, std::string_view b);

// The token of `before` + `a` that contains the difference: the run of characters of one
// class (digits and date/time punctuation, hex and dashes, word characters) around it.
std::string difference_token(std::string_view before, std::string_view a);

// The two values that differ, when the sides are known to agree again after `a_len`
// characters of `a` and `b_len` of `b` (kv/near_miss.h realigned them): both widened to whole
// words and ids (`2026-11-29T10:04:25Z`, not `5`; `Alice`, not `Customer: `) by the
// characters they share before and after.
struct DifferingValues {
  std::string a, b;
};
DifferingValues widen_values(std::string_view before, std::string_view a, size_t a_len,
                             std::string_view b, size_t b_len);
// A value as a reader sees it, one line: control characters and invisible spaces escaped
// (`\r\n`, `\u00a0`), cut after `max_characters` bytes with "...".
std::string show_value(std::string_view value, size_t max_characters = 60);

}  // namespace rapide::advise
