// Synthetic prompt text of a requested token length.
//
// A benchmark against a remote server does not know its tokenizer, so lengths are fitted with
// a token counter when one is given (the model's own tokenizer) and estimated otherwise
// (about 1.3 tokens per English word, typical of BPE vocabularies). Servers report the real
// prompt token count in `usage`, so results never depend on the estimate.
#pragma once

#include <cstddef>
#include <functional>
#include <random>
#include <string>

namespace rapide::loadgen {

using TokenCounter = std::function<size_t(const std::string&)>;

class TextGen {
 public:
  // counter may be empty (estimate by words).
  TextGen(uint64_t seed, TokenCounter counter);

  // Random English-looking words totalling about `tokens` tokens. Every call gives new text,
  // so two prompts share no prefix unless the workload makes them.
  std::string words(int tokens);

 private:
  std::mt19937_64 rng_;
  TokenCounter counter_;
};

}  // namespace rapide::loadgen
