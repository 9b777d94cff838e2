// Cuts text into plain-text fragments and special-token matches before tokenization, the
// way llama.cpp's tokenizer_st_partition does, so ids agree with llama.cpp on chat prompts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer_data.h"

namespace rapide {

// A piece of the input: either the special token `token` or, when token < 0, the plain text
// text.substr(offset, length).
struct TextFragment {
  int32_t token = -1;
  size_t offset = 0;
  size_t length = 0;
};

class SpecialTokenSplitter {
 public:
  // Candidates are the control, user-defined and unknown tokens of `data`, with the strip
  // bits of data.strip (none when it is empty).
  explicit SpecialTokenSplitter(const TokenizerData& data);

  // User-defined tokens always match (like Hugging Face "added tokens"); control and unknown
  // tokens (<|im_start|>, <s>, <unk>) only when parse_special, so untrusted text cannot
  // inject them. Longer tokens are matched first over the whole text, then shorter ones in
  // what remains; the result covers `text` in order, except the ASCII whitespace (C isspace,
  // as llama.cpp) that a token with kStripLeft / kStripRight swallows next to it; a text
  // fragment left empty by that disappears.
  std::vector<TextFragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Candidate {
    int32_t id;
    std::string text;
    bool needs_parse_special;
    uint8_t strip;  // TokenStrip bits
  };
  std::vector<Candidate> candidates_;  // longest text first
};

}  // namespace rapide
