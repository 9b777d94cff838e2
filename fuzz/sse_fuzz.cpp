// libFuzzer target: arbitrary bytes as a Server-Sent Events stream into `rapide bench`'s SSE
// parser, split into reads at the positions the input's first bytes choose (the network splits
// events anywhere). Events must come out the same however the bytes are split, and a stream
// refused (rapide::Error, e.g. a line over a limit) must be refused however it is split.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "loadgen/sse_parser.h"

namespace {

// The events, or nullopt when the parser refused the stream.
std::optional<std::vector<std::string>> parse(std::string_view bytes, size_t chunk) {
  std::vector<std::string> events;
  const auto on_event = [&](const std::string& data) { events.push_back(data); };
  rapide::loadgen::SseParser parser;
  try {
    for (size_t pos = 0; pos < bytes.size(); pos += chunk) {
      parser.feed(bytes.substr(pos, chunk), on_event);
    }
    parser.finish(on_event);
  } catch (const rapide::Error&) {
    return std::nullopt;
  }
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (parse(bytes, chunk) != parse(bytes, bytes.size() + 1)) std::abort();
  return 0;
}
