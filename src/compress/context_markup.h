// How a prompt marks the context that may be compressed: spans between "<context>" and
// "</context>". Everything outside them (instructions, the question) is never touched.
// Inside a span, passages are separated by blank lines ("\n\n"); the separators stay as they
// were between the passages that are kept.
//
//   "Answer from the text.\n<context>Passage one.\n\nPassage two.</context>\nQ: ..."
//
// The delimiters are markup, not prompt: the prompt the model sees has them removed
// (assemble() without any compression gives the prompt with the tags stripped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rapide::compress {

inline constexpr std::string_view kContextOpen = "<context>";
inline constexpr std::string_view kContextClose = "</context>";

// A prompt cut into fixed text and context passages, in order.
struct MarkedPrompt {
  enum class Kind { kFixed, kPassage, kSeparator };
  struct Piece {
    std::string text;
    Kind kind = Kind::kFixed;
    int span = -1;  // which <context> span a passage or separator belongs to
  };
  std::vector<Piece> pieces;

  // Indices of the passage pieces, in prompt order.
  std::vector<size_t> passage_indices() const;
  bool has_context() const { return !passage_indices().empty(); }
};

// Splits `prompt` at the delimiters. Throws Error(kInvalidArgument) for an unclosed
// "<context>", a stray "</context>" or nested spans.
MarkedPrompt parse_marked_prompt(std::string_view prompt);

// The prompt with the delimiters removed; passage i's text replaced by `passages[i]`
// (in passage_indices() order). An empty replacement drops the passage and one separator:
// the kept passages of a span are joined by the separator that followed each of them.
std::string assemble(const MarkedPrompt& marked, const std::vector<std::string>& passages);
// The same with the passages unchanged.
std::string assemble(const MarkedPrompt& marked);

// The text after the last "</context>" with surrounding whitespace trimmed: the question
// when a request does not name one.
std::string text_after_context(std::string_view prompt);

}  // namespace rapide::compress
