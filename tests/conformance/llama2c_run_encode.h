// An independent oracle: the encode() of karpathy/llama2.c run.c, ported line for line
// (greedy best-score pair merging, O(n^2)), reading tokenizer.bin itself rather than going
// through rapide's loader. Only for short texts in tests.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace rapide::testing {

class Llama2cRunEncoder {
 public:
  Llama2cRunEncoder(const std::string& tokenizer_bin, int vocab_size);
  // run.c's encode(t, text, bos, eos=0): BOS (id 1), the " " dummy prefix when the text is
  // non-empty, characters or byte fallback (byte + 3), then merges.
  std::vector<int32_t> encode(const std::string& text, bool bos) const;

 private:
  int32_t lookup(const std::string& piece) const;
  std::vector<std::string> vocab_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace rapide::testing
