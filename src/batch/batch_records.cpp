#include "batch/batch_records.h"

#include "api/api_error.h"
#include "batch/record_journal.h"

namespace rapide::batch {

using nlohmann::json;

FinishedRecord finished_record(const BatchRequest& request, const api::ResponseHeader& header,
                               const std::vector<api::ChoiceOutcome>& choices,
                               const Tokenizer& tokenizer) {
  if (const api::ChoiceOutcome* failed = api::first_failure(choices)) {
    // The server answers the same error (500, or 400 past a limit) for the whole request; a
    // batch reports it as a failed line.
    const LineError e =
        line_error(request, api::generation_failed(failed->error, failed->error_code));
    return {error_record(e), true};
  }
  const json record = {{"id", record_id(request.line, request.digest)},
                       {"custom_id", request.custom_id},
                       {"response",
                        {{"status_code", 200},
                         {"request_id", header.id},
                         {"body", api::response_body(request.spec, header, choices, tokenizer)}}},
                       {"error", nullptr}};
  return {api::dump_json(record), false};
}

std::string error_record(const LineError& e) {
  json response = nullptr;
  if (e.status) {
    response = {
        {"status_code", *e.status}, {"request_id", record_id(e.line, e.digest)}, {"body", e.body}};
  }
  const json record = {{"id", record_id(e.line, e.digest)},
                       {"custom_id", e.custom_id ? json(*e.custom_id) : json()},
                       {"line", e.line},
                       {"response", std::move(response)},
                       {"error",
                        {{"code", e.code},
                         {"message", e.message},
                         {"param", e.param.empty() ? json() : json(e.param)}}}};
  return api::dump_json(record);
}

}  // namespace rapide::batch
