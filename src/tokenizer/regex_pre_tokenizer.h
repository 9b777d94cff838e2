// Splits text into words with a byte-level BPE model's pre-tokenizer regex (PCRE2, Unicode
// properties, JIT-compiled once per tokenizer). Merges never cross word boundaries.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rapide {

class RegexPreTokenizer {
 public:
  // `pre` is GGUF's tokenizer.ggml.pre: "" / "default" / "gpt2" / "gpt-2", "llama3" /
  // "llama-bpe" / "llama-v3", "qwen2" / "deepseek-r1-qwen". Throws Error(kUnsupported)
  // naming any other value.
  explicit RegexPreTokenizer(std::string_view pre);
  ~RegexPreTokenizer();
  RegexPreTokenizer(const RegexPreTokenizer&) = delete;
  RegexPreTokenizer& operator=(const RegexPreTokenizer&) = delete;

  // The words of `text`, in order and covering it exactly: bytes no alternative matches
  // (e.g. invalid UTF-8) form words of their own, so nothing is lost. Thread-safe.
  std::vector<std::string_view> split(std::string_view text) const;

  // Whether this pre-tokenizer's family takes a whole word that is a token as is, before any
  // merge (Hugging Face "ignore_merges", set for Llama 3 as in llama.cpp).
  bool ignore_merges() const { return ignore_merges_; }
  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::string pattern_;
  bool ignore_merges_ = false;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace rapide
