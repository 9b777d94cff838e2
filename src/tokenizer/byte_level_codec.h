// GPT-2's bytes_to_unicode table: byte-level BPE vocabularies spell every byte as a printable
// character (space is "Ġ", newline "Ċ"), so token texts are valid UTF-8 whatever bytes they
// stand for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rapide::byte_level {

// The UTF-8 text of the character that stands for `byte`.
const std::string& byte_to_symbol(uint8_t byte);

// Maps each character of a token text back to its byte. Characters outside the table (which a
// well-formed vocabulary does not contain) are kept as they are.
std::string symbols_to_bytes(std::string_view text);

}  // namespace rapide::byte_level
