// SentencePiece-style BPE with byte fallback (Llama 1/2, Mistral, TinyLlama, llama2.c's
// tok512), behaving like llama.cpp's llm_tokenizer_spm and llama2.c's run.c encode:
//
//   1. spaces become U+2581 ("▁"), and one "▁" is prepended to text at the start or right
//      after a special token when add_space_prefix;
//   2. the text is split into UTF-8 characters;
//   3. repeatedly, the adjacent pair whose concatenation is a token with the highest score is
//      merged (ties: leftmost), using a priority queue so long texts stay O(n log n);
//   4. symbols that are not tokens become byte tokens "<0xXX>" (byte fallback), or one unknown
//      token per character when the vocabulary has no byte tokens.
//
// There is no pre-tokenizer: the whole fragment is one word, as in sentencepiece.
// Merges in TokenizerData are not used; only scores rank pairs (as in llama.cpp, which is
// the reference for GGUF files whose converter wrote uniform scores).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rapide {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const TokenizerData& data);
  std::string token_to_piece(int32_t id, bool render_special = false) const override;

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override;

 private:
  // Byte fallback for one character that is not a token.
  void append_fallback(std::string_view character, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_tokens_;  // id of "<0xXX>" (or the 1-byte token), -1 if none
  std::vector<std::string> pieces_;       // token_to_piece(id, false), precomputed
};

}  // namespace rapide
