// Small UTF-8 helpers shared by the tokenizers and the streaming detokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rapide::utf8 {

// Length of the sequence a byte starts, judged by its high nibble only, exactly as
// llama.cpp's unicode_len_utf8: continuation and invalid bytes count as length 1. The
// SentencePiece tokenizer splits text this way so that invalid input still round-trips
// through byte fallback.
inline size_t sequence_length(uint8_t lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

// Appends the UTF-8 encoding of a code point (no validation beyond the range).
void append_code_point(std::string& out, uint32_t cp);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Result of inspecting the bytes at the start of `bytes` as one UTF-8 character.
enum class CharStatus {
  kComplete,    // a whole valid character of `length` bytes
  kIncomplete,  // a valid prefix that needs more bytes
  kInvalid,     // `length` bytes that can never become valid (emit U+FFFD for them)
};
struct CharCheck {
  CharStatus status;
  size_t length;
};
// Strict validation (no overlongs, no surrogates, nothing above U+10FFFF); `bytes` must be
// non-empty. Invalid sequences are reported by their maximal subpart, as the Unicode
// standard recommends for U+FFFD substitution.
CharCheck check_char(std::string_view bytes);

}  // namespace rapide::utf8
