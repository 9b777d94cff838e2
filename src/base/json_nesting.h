// How deeply a JSON text nests arrays and objects, measured before it is parsed.
//
// Parsing deep JSON is cheap, but everything that walks the result recursively afterwards
// (copies, dumps, the chat template renderer) uses one stack frame per level: ~60k nested
// arrays in a 120 KB request overflow the stack. Refusing such text up front bounds that.
#pragma once

#include <cstddef>
#include <string_view>

namespace rapide {

// Deep enough for any real request, tool schema or model config (they nest < 20 levels),
// shallow enough that a recursive walk of it uses a few hundred KB of stack at most.
inline constexpr size_t kMaxJsonDepth = 128;

// Whether `text` opens more than `limit` arrays/objects at once, brackets inside strings not
// counted. Linear, no allocation; says nothing about whether `text` is otherwise valid JSON.
bool json_nesting_exceeds(std::string_view text, size_t limit = kMaxJsonDepth);

}  // namespace rapide
