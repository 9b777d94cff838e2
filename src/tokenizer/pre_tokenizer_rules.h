// Which regexes a byte-level BPE vocabulary is pre-tokenized with, by the name GGUF stores in
// tokenizer.ggml.pre, as llama.cpp's llm_tokenizer_bpe chooses them.
//
// llama.cpp applies a list of regexes in order: each one re-splits every piece the previous
// ones produced, keeping both what it matched and the unmatched text between matches (see
// RegexPreTokenizer::split). The patterns here are PCRE2 spellings of the published rules;
// llama.cpp's std::regex emulation maps \p{L}, \p{N}, \p{P} to the Unicode categories and
// treats exactly the Unicode White_Space characters as \s. PCRE2_UCP's \s also takes U+180E,
// so the regexes returned spell \s and \S out as classes of White_Space.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rapide {

struct PreTokenizerRules {
  std::string family;                // canonical name, for messages ("llama3", "default", ...)
  std::vector<std::string> regexes;  // applied in order, each within the previous pieces
  bool ignore_merges = false;        // a word that is a token is taken whole (Llama 3)
};

// `pre` as found in tokenizer.ggml.pre. An empty value means the file names none: llama.cpp
// then warns and uses its "default" rules, and so do we. Any other name llama.cpp does not
// know makes it refuse the model ("unknown pre-tokenizer type"): we throw Error(kUnsupported)
// naming it. "gpt2" is accepted as a rapide alias of "gpt-2" (older rapide HF imports).
PreTokenizerRules pre_tokenizer_rules(std::string_view pre);

}  // namespace rapide
