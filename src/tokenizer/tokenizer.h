// Text <-> token ids. Built from the TokenizerData any model loader produces.
//
// Two algorithms, both matching llama.cpp id for id on its conformance vectors:
//   * SentencePiece-style BPE with byte fallback (Llama 1/2, Mistral, TinyLlama, llama2.c):
//     see sentencepiece_tokenizer.h.
//   * Byte-level BPE (GPT-2, Llama 3, Qwen2): see byte_level_bpe_tokenizer.h.
// Both share the special-token handling and BOS logic implemented here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer_data.h"
#include "tokenizer/special_token_splitter.h"
#include "tokenizer/token_index.h"

namespace rapide {

class Tokenizer {
 public:
  // Throws Error(kUnsupported) for TokenizerKind::kNone or an unknown pre-tokenizer,
  // Error(kCorrupt) for inconsistent data (a merge naming an unknown token, a special id
  // outside the vocabulary, more scores or types than tokens).
  static std::unique_ptr<Tokenizer> create(const TokenizerData& data);
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Encodes text (thread-safe). add_bos prepends BOS when the vocabulary has one and its
  // data asks for it (data().add_bos); EOS is never appended. parse_special makes the text
  // of control tokens (e.g. "<|im_start|>", "<s>") encode to those tokens; otherwise it is
  // tokenized as plain text. User-defined tokens always encode to themselves, as in llama.cpp.
  // Throws Error(kInvalidArgument) only for a character a SentencePiece vocabulary can express
  // neither as byte tokens nor as its unknown token.
  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const;

  // The bytes a token contributes to the text (byte-fallback tokens give their raw byte,
  // SentencePiece's U+2581 becomes a space, byte-level BPE symbols map back to bytes).
  // Control and unknown tokens give "" unless render_special (then their text).
  // Throws Error(kInvalidArgument) for an id outside the vocabulary.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;

  // Decodes a whole sequence. When skip_leading_space and the vocabulary prepends a space
  // (SentencePiece add_space_prefix), the first space of the first non-empty piece is dropped,
  // as sentencepiece does, so decode(encode(s)) == s. render_special: control and unknown
  // tokens give their text (see token_to_piece).
  std::string decode(std::span<const int32_t> ids, bool skip_leading_space = true,
                     bool render_special = false) const;

  int vocab_size() const { return static_cast<int>(data_.tokens.size()); }
  int32_t bos_id() const { return data_.bos_id; }
  int32_t eos_id() const { return data_.eos_id; }
  // Always false for byte-level BPE, whose pre-tokenizer keeps spaces itself.
  bool add_space_prefix() const { return data_.add_space_prefix; }
  // End-of-generation: EOS, or a control token such as <|eot_id|>, <|im_end|>, <|end|>,
  // <|endoftext|> or </s>.
  bool is_end_of_generation(int32_t id) const;
  bool is_control(int32_t id) const;
  // The data as normalized at construction (types filled in, see tokenizer.cpp).
  const TokenizerData& data() const { return data_; }

 protected:
  explicit Tokenizer(const TokenizerData& data);
  // Appends the ids of a plain-text fragment. after_special: the fragment starts the text or
  // follows a special token (SentencePiece prepends its space there).
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<int32_t>& out) const = 0;
  TokenType type_of(int32_t id) const { return data_.types[static_cast<size_t>(id)]; }
  void check_id(int32_t id) const;
  const TokenIndex& index() const { return index_; }

  TokenizerData data_;

 private:
  TokenIndex index_;
  SpecialTokenSplitter splitter_;
  std::vector<bool> end_of_generation_;
};

// Turns a stream of token ids into text pieces without ever emitting part of a UTF-8
// character: bytes of an incomplete character are held until the character completes;
// bytes that can never form a character come out as U+FFFD, so every piece is valid UTF-8.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_leading_space = true);
  // Returns the text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held (an incomplete character as U+FFFD) and empties the buffer.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
  bool at_start_;
  bool skip_leading_space_;
};

}  // namespace rapide
