#include "compress/context_markup.h"

#include "base/error.h"

namespace rapide::compress {

namespace {

using Kind = MarkedPrompt::Kind;

// Cuts a span's text into passages at runs of two or more newlines.
void split_span(std::string_view text, int span, std::vector<MarkedPrompt::Piece>& out) {
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t blank = text.find("\n\n", begin);
    if (blank == std::string_view::npos) {
      out.push_back({std::string(text.substr(begin)), Kind::kPassage, span});
      return;
    }
    size_t end = blank;
    while (end < text.size() && text[end] == '\n') ++end;
    out.push_back({std::string(text.substr(begin, blank - begin)), Kind::kPassage, span});
    out.push_back({std::string(text.substr(blank, end - blank)), Kind::kSeparator, span});
    begin = end;
  }
}

}  // namespace

std::vector<size_t> MarkedPrompt::passage_indices() const {
  std::vector<size_t> indices;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].kind == Kind::kPassage) indices.push_back(i);
  }
  return indices;
}

MarkedPrompt parse_marked_prompt(std::string_view prompt) {
  MarkedPrompt marked;
  size_t at = 0;
  int span = 0;
  while (true) {
    const size_t open = prompt.find(kContextOpen, at);
    const size_t stray = prompt.find(kContextClose, at);
    if (stray != std::string_view::npos && stray < open) {
      fail(ErrorCode::kInvalidArgument, "'{}' at byte {} closes no '{}'", kContextClose, stray,
           kContextOpen);
    }
    if (open == std::string_view::npos) {
      marked.pieces.push_back({std::string(prompt.substr(at)), Kind::kFixed, -1});
      return marked;
    }
    marked.pieces.push_back({std::string(prompt.substr(at, open - at)), Kind::kFixed, -1});
    const size_t inner = open + kContextOpen.size();
    const size_t close = prompt.find(kContextClose, inner);
    if (close == std::string_view::npos) {
      fail(ErrorCode::kInvalidArgument, "'{}' at byte {} is never closed by '{}'", kContextOpen,
           open, kContextClose);
    }
    const std::string_view text = prompt.substr(inner, close - inner);
    if (text.find(kContextOpen) != std::string_view::npos) {
      fail(ErrorCode::kInvalidArgument, "'{}' spans may not nest (byte {})", kContextOpen, open);
    }
    split_span(text, span++, marked.pieces);
    at = close + kContextClose.size();
  }
}

std::string assemble(const MarkedPrompt& marked, const std::vector<std::string>& passages) {
  std::string out;
  size_t next_passage = 0;
  // Within a span: the separator after the last kept passage waits until another kept
  // passage follows it, so a dropped passage takes one separator with it.
  std::string pending_separator;
  bool kept_in_span = false;
  for (const MarkedPrompt::Piece& piece : marked.pieces) {
    switch (piece.kind) {
      case Kind::kFixed:
        pending_separator.clear();
        kept_in_span = false;
        out += piece.text;
        break;
      case Kind::kPassage: {
        const std::string& text = passages.at(next_passage++);
        if (text.empty()) break;
        if (kept_in_span) out += pending_separator;
        out += text;
        kept_in_span = true;
        pending_separator.clear();
        break;
      }
      case Kind::kSeparator:
        if (pending_separator.empty()) pending_separator = piece.text;
        break;
    }
  }
  return out;
}

std::string assemble(const MarkedPrompt& marked) {
  std::vector<std::string> passages;
  for (size_t i : marked.passage_indices()) passages.push_back(marked.pieces[i].text);
  return assemble(marked, passages);
}

std::string text_after_context(std::string_view prompt) {
  const size_t close = prompt.rfind(kContextClose);
  if (close == std::string_view::npos) return {};
  std::string_view rest = prompt.substr(close + kContextClose.size());
  const size_t first = rest.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const size_t last = rest.find_last_not_of(" \t\r\n");
  return std::string(rest.substr(first, last - first + 1));
}

}  // namespace rapide::compress
