#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace rapide {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_leading_space)
    : tokenizer_(tokenizer), at_start_(true), skip_leading_space_(skip_leading_space) {}

std::string StreamingDetokenizer::push(int32_t id) {
  std::string piece = tokenizer_.token_to_piece(id);
  if (piece.empty()) return {};
  // Same rule as Tokenizer::decode, so streamed text concatenates to the decoded text.
  if (at_start_ && skip_leading_space_ && tokenizer_.add_space_prefix() && piece.front() == ' ') {
    piece.erase(0, 1);
  }
  at_start_ = false;
  pending_ += piece;

  std::string ready;
  size_t i = 0;
  while (i < pending_.size()) {
    const utf8::CharCheck check = utf8::check_char(std::string_view(pending_).substr(i));
    if (check.status == utf8::CharStatus::kIncomplete) break;  // wait for the next token
    if (check.status == utf8::CharStatus::kComplete) {
      ready.append(pending_, i, check.length);
    } else {
      // Bytes that no continuation can repair: substitute now rather than hold them forever.
      ready += utf8::kReplacementCharacter;
    }
    i += check.length;
  }
  pending_.erase(0, i);
  return ready;
}

std::string StreamingDetokenizer::flush() {
  std::string rest;
  // What is held is always the valid beginning of one character (push emits everything
  // else), so it stands for exactly one replacement character.
  if (!pending_.empty()) rest = utf8::kReplacementCharacter;
  pending_.clear();
  return rest;
}

}  // namespace rapide
