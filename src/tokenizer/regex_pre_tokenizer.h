// Splits text into words with a byte-level BPE model's pre-tokenizer: the list of regexes
// pre_tokenizer_rules() gives for its tokenizer.ggml.pre (PCRE2, Unicode properties,
// JIT-compiled once per tokenizer). Merges never cross word boundaries.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rapide {

class RegexPreTokenizer {
 public:
  // `pre` is GGUF's tokenizer.ggml.pre (see pre_tokenizer_rules.h for the names). Throws
  // Error(kUnsupported) naming a value llama.cpp does not know.
  explicit RegexPreTokenizer(std::string_view pre);
  ~RegexPreTokenizer();
  RegexPreTokenizer(const RegexPreTokenizer&) = delete;
  RegexPreTokenizer& operator=(const RegexPreTokenizer&) = delete;

  // The words of `text`, in order and covering it exactly. As in llama.cpp, the regexes run
  // in order, each over every word the previous ones left (a word is the whole subject, so
  // (?!\S) and $ see its end as the end of the text); a regex's matches become words and so
  // does each stretch of text between them that it did not match (bytes no alternative
  // matches, e.g. invalid UTF-8, included), so nothing is lost. Thread-safe.
  std::vector<std::string_view> split(std::string_view text) const;

  // Whether this pre-tokenizer's family takes a whole word that is a token as is, before any
  // merge (Hugging Face "ignore_merges", set for Llama 3 as in llama.cpp).
  bool ignore_merges() const { return ignore_merges_; }
  // The canonical family name ("default", "gpt-2", "llama3", ...).
  const std::string& family() const { return family_; }

 private:
  struct Compiled;
  std::string family_;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Compiled>> stages_;
};

}  // namespace rapide
