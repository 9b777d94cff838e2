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

}  // namespace rapide::advise
