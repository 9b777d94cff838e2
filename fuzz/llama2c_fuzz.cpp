// libFuzzer target: arbitrary bytes through the llama2.c checkpoint header (seven int32 sizes
// whose products must not overflow) and the tokenizer.bin parser. Any input must be accepted
// or rejected with rapide::Error; a header that passes must describe sizes that add up.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "base/error.h"
#include "formats/llama2c_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const rapide::Llama2cHeader h = rapide::parse_llama2c_header(data, size, "fuzz.bin");
    // An accepted header names a file at least as large as itself.
    if (h.expected_file_bytes < static_cast<int64_t>(h.header_bytes)) std::abort();
  } catch (const rapide::Error&) {
  }
  try {
    // The vocabulary size comes from the checkpoint in real use; the first byte picks one.
    const int vocab = size > 0 ? 1 + data[0] : 32;
    rapide::parse_llama2c_tokenizer(data, size, "fuzz-tok.bin", vocab);
  } catch (const rapide::Error&) {
  }
  return 0;
}
