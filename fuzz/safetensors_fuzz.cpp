// libFuzzer target: arbitrary bytes through the safetensors reader (8-byte length, JSON
// header, tensor table). Any input must be accepted or rejected with rapide::Error.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "formats/safetensors_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const rapide::SafetensorsFile f =
        rapide::SafetensorsFile::parse(data, size, "fuzz.safetensors");
    // Touch every tensor's first and last byte: views must lie inside the input.
    volatile uint8_t sink = 0;
    for (const auto& t : f.tensors()) {
      if (t.size_bytes > 0) sink = sink + t.data[0] + t.data[t.size_bytes - 1];
    }
  } catch (const rapide::Error&) {
  }
  return 0;
}
