#include "tokenizer/byte_level_codec.h"

#include <array>

#include "tokenizer/utf8.h"

namespace rapide::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> symbol_of_byte;
  std::array<int, 512> byte_of_code_point;  // -1 where no byte maps to the code point

  Tables() {
    byte_of_code_point.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the others (controls, space, 0x7F-0xA0,
    // 0xAD) are moved to 256, 257, ... in byte order, exactly as GPT-2's encoder.py does.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : next++;
      utf8::append_code_point(symbol_of_byte[b], static_cast<uint32_t>(cp));
      byte_of_code_point[cp] = b;
    }
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

const std::string& byte_to_symbol(uint8_t byte) {
  return tables().symbol_of_byte[byte];
}

std::string symbols_to_bytes(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<uint8_t>(text[i]);
    // Table characters are all below U+0200: one or two bytes.
    if (lead < 0x80) {
      const int b = t.byte_of_code_point[lead];
      out.push_back(b >= 0 ? static_cast<char>(b) : static_cast<char>(lead));
      ++i;
      continue;
    }
    const size_t length = std::min(utf8::sequence_length(lead), text.size() - i);
    if (length == 2) {
      const uint32_t cp = ((lead & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      if (cp < t.byte_of_code_point.size() && t.byte_of_code_point[cp] >= 0) {
        out.push_back(static_cast<char>(t.byte_of_code_point[cp]));
        i += 2;
        continue;
      }
    }
    out.append(text, i, length);
    i += length;
  }
  return out;
}

}  // namespace rapide::byte_level
