// libFuzzer target: arbitrary bytes as a Hugging Face tokenizer.json, then the tokenizer built
// from what was accepted encodes and decodes a fixed text. Loading must be accepted or
// rejected with rapide::Error; a tokenizer that loads must not crash on use.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "formats/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rapide::HfTokenizerInputs in;
  in.tokenizer_json.assign(reinterpret_cast<const char*>(data), size);
  in.model_type = "llama";
  std::unique_ptr<rapide::Tokenizer> tokenizer;
  try {
    tokenizer = rapide::Tokenizer::create(rapide::parse_hf_tokenizer(in, "fuzz"));
  } catch (const rapide::Error&) {
    return 0;
  }
  try {
    const std::vector<int32_t> ids =
        tokenizer->encode("Hello world, <s> héllo\n\t  12345 ünïcödé 🙂", true, true);
    (void)tokenizer->decode(ids);
  } catch (const rapide::Error&) {
    // kInvalidArgument: a character the vocabulary cannot express (documented).
  }
  return 0;
}
