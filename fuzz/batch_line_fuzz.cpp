// libFuzzer target: arbitrary bytes as lines of a `rapide batch` input file, each through the
// batch's request parser (envelope, custom_id uniqueness, then the server's own body checks)
// on the built-in demo model. Every line must become a request or a line error; an exception
// escaping the parser, or a line error that would be a 5xx, is a bug. Lines are split as
// JsonlReader splits them (at '\n', blank lines skipped).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "batch/batch_request.h"
#include "batch/jsonl_reader.h"
#include "fuzz_demo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rapide::fuzz::DemoServer& server = rapide::fuzz::demo_server();
  rapide::batch::RequestParser parser(*server.engine, server.chat, rapide::serve::kDemoModelId);
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  uint64_t line_number = 0;
  for (size_t start = 0; start <= input.size();) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    std::string line(input.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (rapide::batch::is_blank(line)) continue;
    const auto result = parser.parse(line, line_number);
    if (const auto* error = std::get_if<rapide::batch::LineError>(&result)) {
      if (error->status && *error->status >= 500) std::abort();
    }
  }
  return 0;
}
