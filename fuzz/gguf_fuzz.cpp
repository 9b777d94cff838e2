// libFuzzer target: arbitrary bytes through the GGUF reader and the GGUF -> ModelFile
// mapping (config, tokenizer, shape checks). Any input must either load or throw
// rapide::Error; crashes, sanitizer reports and other exceptions are bugs.
//
//   build-fuzz/fuzz/gguf_fuzz -max_total_time=60 -max_len=65536 CORPUS_DIR tests/data/formats
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "formats/gguf_model.h"
#include "formats/gguf_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const rapide::GgufFile file = rapide::GgufFile::parse(data, size, "fuzz.gguf");
    const rapide::ModelFile model = rapide::model_from_gguf(file);
    // Touch every tensor's first and last byte: views must lie inside the input.
    volatile uint8_t sink = 0;
    for (const auto& t : model.tensors) {
      if (t.size_bytes > 0) sink = sink + t.data[0] + t.data[t.size_bytes - 1];
    }
    for (const auto& kv : file.metadata()) (void)kv.value.to_string();
  } catch (const rapide::Error&) {
    // Rejected input: the expected outcome for almost everything.
  }
  return 0;
}
