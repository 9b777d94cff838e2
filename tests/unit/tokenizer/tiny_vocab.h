// Hand-built vocabularies small enough to reason about token by token.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "formats/tokenizer_data.h"
#include "tokenizer/byte_level_codec.h"

namespace rapide::testing {

inline constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581

// SentencePiece layout: <unk> <s> </s>, optionally the 256 byte tokens, then `pieces`
// (text, score). Returns the data; piece i has id first_piece_id(with_bytes) + i.
inline TokenizerData spm_vocab(const std::vector<std::pair<std::string, float>>& pieces,
                               bool with_bytes = true) {
  TokenizerData d;
  d.kind = TokenizerKind::kSentencePiece;
  auto add = [&d](std::string text, float score, TokenType type) {
    d.tokens.push_back(std::move(text));
    d.scores.push_back(score);
    d.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(name, 0, TokenType::kByte);
    }
  }
  for (const auto& [text, score] : pieces) add(text, score, TokenType::kNormal);
  d.unk_id = 0;
  d.bos_id = 1;
  d.eos_id = 2;
  return d;
}
inline int32_t first_piece_id(bool with_bytes = true) {
  return with_bytes ? 259 : 3;
}
inline int32_t byte_id(int b) {
  return 3 + b;
}  // in spm_vocab with bytes

// Byte-level layout: the 256 byte characters (id = byte), then `merges` in priority order,
// each adding its result token (id 256 + i), then `extra` tokens.
inline TokenizerData byte_level_vocab(
    const std::vector<std::pair<std::string, std::string>>& merges,
    const std::string& pre = "gpt2") {
  TokenizerData d;
  d.kind = TokenizerKind::kByteLevelBpe;
  d.pre = pre;
  d.add_bos = false;
  for (int b = 0; b < 256; ++b)
    d.tokens.push_back(byte_level::byte_to_symbol(static_cast<uint8_t>(b)));
  for (const auto& [left, right] : merges) {
    d.tokens.push_back(left + right);
    d.merges.push_back(left + " " + right);
  }
  d.types.assign(d.tokens.size(), TokenType::kNormal);
  return d;
}

}  // namespace rapide::testing
