// Text <-> token ids. Built from the TokenizerData any model loader produces.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer_data.h"

namespace rapide {

class Tokenizer {
 public:
  // Throws Error(kUnsupported) for TokenizerKind::kNone or an unknown pre-tokenizer,
  // Error(kCorrupt) for inconsistent data (e.g. a merge naming an unknown token).
  static std::unique_ptr<Tokenizer> create(const TokenizerData& data);
  virtual ~Tokenizer() = default;

  // Encodes text. add_bos prepends BOS when the vocabulary has one. parse_special makes the
  // text of control/user-defined tokens (e.g. "<|im_start|>") encode to those tokens;
  // otherwise such text is tokenized as plain text.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos,
                                      bool parse_special = false) const = 0;

  // The bytes a token contributes to the text (byte-fallback tokens give their raw byte,
  // SentencePiece's U+2581 becomes a space, byte-level BPE symbols map back to bytes).
  // Control tokens (BOS/EOS...) give "" unless render_special.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;

  // Decodes a whole sequence; drops the leading space SentencePiece adds after BOS
  // (as llama.cpp and sentencepiece do) when skip_leading_space.
  std::string decode(std::span<const int32_t> ids, bool skip_leading_space = true) const;

  int vocab_size() const { return static_cast<int>(data_.tokens.size()); }
  int32_t bos_id() const { return data_.bos_id; }
  int32_t eos_id() const { return data_.eos_id; }
  bool add_space_prefix() const { return data_.add_space_prefix; }
  // End-of-generation: EOS, or a control token such as <|eot_id|> / <|im_end|>.
  bool is_end_of_generation(int32_t id) const;
  bool is_control(int32_t id) const;
  const TokenizerData& data() const { return data_; }

 protected:
  explicit Tokenizer(const TokenizerData& data) : data_(data) {}
  TokenizerData data_;
};

// Turns a stream of token ids into text pieces without ever emitting part of a UTF-8
// character: bytes of an incomplete character are held until the character completes
// (or flush() emits them replaced by U+FFFD).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_leading_space = true);
  // Returns the text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held (invalid/incomplete bytes as U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
  bool at_start_;
  bool skip_leading_space_;
};

}  // namespace rapide
