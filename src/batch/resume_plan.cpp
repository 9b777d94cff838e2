#include "batch/resume_plan.h"

#include <unordered_map>

#include <fmt/format.h>

#include "api/api_error.h"
#include "api/json_limited.h"
#include "base/error.h"
#include "batch/batch_request.h"
#include "batch/fnv1a.h"
#include "batch/jsonl_reader.h"

namespace rapide::batch {

namespace {

std::optional<std::string> custom_id_of_line(const std::string& text) {
  try {
    return custom_id_of(api::parse_json_limited(text, "the line"));
  } catch (const api::ApiError&) {
    return std::nullopt;  // invalid JSON: an error record, identified by line and digest
  }
}

}  // namespace

ResumePlan plan_resume(const std::string& input, const AnsweredRequests& answered,
                       const std::string& journals) {
  ResumePlan plan;
  JsonlReader reader(input);
  std::unordered_map<std::string, uint64_t> line_of;  // custom_id -> its line
  size_t matched = 0;
  std::string text;
  while (reader.next(text)) {
    ++plan.total_lines;
    const uint64_t line = reader.line_number();
    const uint64_t digest = fnv1a64(text);
    const std::optional<std::string> custom_id = custom_id_of_line(text);
    const RecordKey* answer = nullptr;
    if (custom_id) {
      const auto [first, inserted] = line_of.emplace(*custom_id, line);
      if (!inserted) {
        fail(ErrorCode::kInvalidArgument,
             "custom_id '{}' appears on lines {} and {} of '{}': every request needs its own "
             "custom_id (nothing was run)",
             *custom_id, first->second, line, input);
      }
      if (auto it = answered.by_custom_id.find(*custom_id); it != answered.by_custom_id.end()) {
        answer = &it->second;
      }
    } else if (auto it = answered.by_line.find(line); it != answered.by_line.end()) {
      // Without a custom_id only the same bytes at the same line are the same request.
      if (it->second.digest == digest) answer = &it->second;
    }
    if (!answer) continue;
    if (answer->digest && *answer->digest != digest) {
      fail(ErrorCode::kInvalidArgument,
           "line {} of '{}' (custom_id '{}') changed since its answer was written to {} (as "
           "line {}): refusing to attach that answer to the edited request; give the edited "
           "request a new custom_id, or use new output file names (nothing was run)",
           line, input, *custom_id, journals, answer->line);
    }
    plan.answered_lines.insert(line);
    ++matched;
  }
  plan.orphaned_records = answered.size() - matched;
  return plan;
}

}  // namespace rapide::batch
