// libFuzzer target: arbitrary bytes through the safetensors reader and the llama2.c header
// and tokenizer.bin parsers. Any input must be accepted or rejected with rapide::Error.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "formats/llama2c_loader.h"
#include "formats/safetensors_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  volatile uint8_t sink = 0;
  try {
    const rapide::SafetensorsFile f =
        rapide::SafetensorsFile::parse(data, size, "fuzz.safetensors");
    for (const auto& t : f.tensors()) {
      if (t.size_bytes > 0) sink = sink + t.data[0] + t.data[t.size_bytes - 1];
    }
  } catch (const rapide::Error&) {
  }
  try {
    rapide::parse_llama2c_header(data, size, "fuzz.bin");
  } catch (const rapide::Error&) {
  }
  try {
    rapide::parse_llama2c_tokenizer(data, size, "fuzz-tok.bin", 64);
  } catch (const rapide::Error&) {
  }
  return 0;
}
