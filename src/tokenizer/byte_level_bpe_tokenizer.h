// Byte-level BPE (GPT-2, Llama 3, Qwen2), behaving like llama.cpp's llm_tokenizer_bpe:
//
//   1. the pre-tokenizer regex of TokenizerData::pre cuts the text into words;
//   2. each byte of a word becomes the token of its bytes_to_unicode character;
//   3. within a word, the adjacent pair with the lowest merge rank is merged until no pair
//      has a merge (ties: leftmost), using a priority queue so long words stay O(n log n).
//
// With the Llama 3 pre-tokenizer a word that is itself a token is emitted whole (Hugging Face
// ignore_merges). No space is ever prepended: add_space_prefix is forced off.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/regex_pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace rapide {

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  // Throws Error(kUnsupported) for an unknown pre-tokenizer, Error(kCorrupt) for a malformed
  // merge or one whose parts or result are not tokens.
  explicit ByteLevelBpeTokenizer(const TokenizerData& data);
  std::string token_to_piece(int32_t id, bool render_special = false) const override;

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Merge* find_merge(int32_t left, int32_t right) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  RegexPreTokenizer pre_tokenizer_;
  std::array<int32_t, 256> byte_tokens_;  // token of each byte's character, -1 if absent
  // Keyed by the pair of token ids: comparing ids instead of strings keeps merging cheap.
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::string> pieces_;  // token_to_piece(id, false), precomputed
};

}  // namespace rapide
