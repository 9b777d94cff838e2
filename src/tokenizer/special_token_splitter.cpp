#include "tokenizer/special_token_splitter.h"

#include <algorithm>
#include <cctype>

namespace rapide {

SpecialTokenSplitter::SpecialTokenSplitter(const TokenizerData& data) {
  for (size_t i = 0; i < data.tokens.size() && i < data.types.size(); ++i) {
    const TokenType type = data.types[i];
    if (data.tokens[i].empty()) continue;
    const uint8_t strip = i < data.strip.size() ? data.strip[i] : uint8_t{kStripNone};
    if (type == TokenType::kControl || type == TokenType::kUnknown) {
      candidates_.push_back({static_cast<int32_t>(i), data.tokens[i], true, strip});
    } else if (type == TokenType::kUserDefined) {
      candidates_.push_back({static_cast<int32_t>(i), data.tokens[i], false, strip});
    }
  }
  // Stable so that equally long tokens keep id order and the result is deterministic.
  std::stable_sort(
      candidates_.begin(), candidates_.end(),
      [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });
}

std::vector<TextFragment> SpecialTokenSplitter::split(std::string_view text,
                                                      bool parse_special) const {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  std::vector<TextFragment> next;
  for (const Candidate& candidate : candidates_) {
    if (candidate.needs_parse_special && !parse_special) continue;
    // Cheap rejection first: most candidates never occur, and the common case must not pay
    // for rebuilding the fragment list once per special token.
    if (text.find(candidate.text) == std::string_view::npos) continue;
    next.clear();
    bool changed = false;
    for (const TextFragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      const std::string_view raw = text.substr(fragment.offset, fragment.length);
      const auto space = [&](size_t i) {
        return std::isspace(static_cast<unsigned char>(raw[i])) != 0;
      };
      size_t start = 0;
      for (size_t match = raw.find(candidate.text); match != std::string_view::npos;
           match = raw.find(candidate.text, start)) {
        size_t left_end = match;
        if (candidate.strip & kStripLeft) {
          while (left_end > start && space(left_end - 1)) --left_end;
        }
        if (left_end > start) next.push_back({-1, fragment.offset + start, left_end - start});
        next.push_back({candidate.id, fragment.offset + match, candidate.text.size()});
        start = match + candidate.text.size();
        if (candidate.strip & kStripRight) {
          while (start < raw.size() && space(start)) ++start;
        }
        changed = true;
      }
      if (start < raw.size()) next.push_back({-1, fragment.offset + start, raw.size() - start});
    }
    if (changed) fragments.swap(next);
  }
  return fragments;
}

}  // namespace rapide
