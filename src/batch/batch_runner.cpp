#include "batch/batch_runner.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "api/chat.h"
#include "api/engine_requests.h"
#include "base/error.h"
#include "base/logging.h"
#include "batch/batch_progress.h"
#include "batch/batch_records.h"
#include "batch/batch_request.h"
#include "batch/journal_owner.h"
#include "batch/jsonl_reader.h"
#include "batch/resume_plan.h"
#include "batch/submission_queue.h"

namespace rapide::batch {

namespace {

// A request whose choices are in the engine.
struct RunningRequest {
  BatchRequest request;
  Ticket ticket;
  bool started = false;  // the first event came back: its prompt is in the prefix cache
  api::ResponseHeader header;
  std::vector<api::ChoiceOutcome> choices;
  size_t remaining = 0;
};

class BatchRunner {
 public:
  BatchRunner(Engine& engine, const BatchOptions& options);
  BatchSummary run();

 private:
  // Reads the next window of runnable requests (answering bad lines on the way); false when
  // the input is exhausted.
  bool refill_window();
  // Hands requests to the engine until `in_flight` engine requests are out or none may go.
  void submit_ready();
  void submit(BatchRequest&& request, const Ticket& ticket);
  void on_event(TokenEvent&& event);
  void write_error(const LineError& error);
  void finish(uint64_t line);

  Engine& engine_;
  const BatchOptions& options_;
  const int target_in_flight_;
  api::ChatPrompter chat_;
  RequestParser parser_;
  ResumePlan plan_;
  BatchSummary summary_;
  std::unique_ptr<JsonlReader> reader_;
  std::unique_ptr<RecordWriter> output_;
  std::unique_ptr<RecordWriter> errors_;
  std::unique_ptr<BatchProgress> progress_;
  ProgressCounts counts_;
  std::shared_ptr<EventQueue> events_ = std::make_shared<EventQueue>();

  SubmissionQueue queue_;
  bool input_done_ = false;
  std::unordered_map<uint64_t, std::unique_ptr<RunningRequest>> running_;  // by input line
  struct ChoiceRef {
    RunningRequest* request;
    size_t choice;
  };
  std::unordered_map<RequestId, ChoiceRef> choices_;  // engine requests in flight
};

int clamp_in_flight(const Engine& engine, int wanted) {
  // A whole request (up to kMaxChoices choices) is submitted at once; keep the engine's
  // queue from refusing it.
  const int room = engine.options().max_queue - api::kMaxChoices;
  return std::max(1, std::min(wanted, std::max(room, 1)));
}

BatchRunner::BatchRunner(Engine& engine, const BatchOptions& options)
    : engine_(engine),
      options_(options),
      target_in_flight_(clamp_in_flight(
          engine, options.in_flight > 0 ? options.in_flight : default_in_flight(engine.options()))),
      chat_(engine.tokenizer()),
      parser_(engine, chat_, options.model_id),
      queue_(options.order, engine.options().kv_block_size) {
  const std::string errors_path =
      options.errors.empty() ? default_errors_path(options.output) : options.errors;
  check_distinct_files(options.input, options.output, errors_path);
  reader_ = std::make_unique<JsonlReader>(options.input);
  // Before recovery, which may cut a file: only files of a batch of this input are touched.
  const InputFingerprint fingerprint = fingerprint_input(options.input);
  claim_journal(options.output, options.input, fingerprint);
  claim_journal(errors_path, options.input, fingerprint);
  // Recover before appending: recovery may cut a torn tail.
  AnsweredRequests answered;
  const Recovery out = recover_records(options.output, answered);
  const Recovery err = recover_records(errors_path, answered);
  // Before anything runs: duplicate custom_ids and edited answered requests stop here.
  plan_ = plan_resume(options.input, answered,
                      fmt::format("'{}' or '{}'", options.output, errors_path));
  summary_.resumed = plan_.answered_lines.size();
  summary_.truncated_bytes = out.truncated_bytes + err.truncated_bytes;
  summary_.corrupt_lines = out.corrupt_lines + err.corrupt_lines;
  counts_.done = summary_.resumed;
  counts_.errors = err.records;
  summary_.total_lines = plan_.total_lines;
  FileSyscalls& files = options.files ? *options.files : real_file_syscalls();
  output_ = std::make_unique<RecordWriter>(options.output, options.sync, files);
  errors_ = std::make_unique<RecordWriter>(errors_path, options.sync, files);
  if (summary_.resumed > 0) {
    spdlog::info("resuming: {} of {} lines already answered ({} in {})", summary_.resumed,
                 summary_.total_lines, err.records, errors_path);
  }
  bool tty = BatchProgress::stderr_is_tty();
  if (options.progress == ProgressMode::kBar) tty = true;
  if (options.progress == ProgressMode::kLines) tty = false;
  if (options.progress != ProgressMode::kOff) {
    progress_ = std::make_unique<BatchProgress>(summary_.total_lines, summary_.resumed, tty,
                                                options.progress_interval_s);
  }
  spdlog::info("batch: window {} requests, {} order, {} engine requests in flight", options.window,
               batch_order_name(options.order), target_in_flight_);
}

bool BatchRunner::refill_window() {
  std::vector<BatchRequest> window;
  std::string text;
  while (window.size() < options_.window && reader_->next(text)) {
    const uint64_t line = reader_->line_number();
    if (plan_.answered_lines.erase(line) > 0) continue;  // answered by an earlier run
    auto parsed = parser_.parse(text, line);
    if (auto* error = std::get_if<LineError>(&parsed)) {
      write_error(*error);
    } else {
      window.push_back(std::move(std::get<BatchRequest>(parsed)));
    }
  }
  if (window.empty()) {
    input_done_ = true;
    return false;
  }
  queue_.add_window(std::move(window));
  return true;
}

void BatchRunner::submit_ready() {
  while (choices_.size() < static_cast<size_t>(target_in_flight_)) {
    auto next = queue_.next();
    if (!next) {
      // Nothing may go now: read more input unless the held requests are only waiting for
      // running ones to start.
      if (!input_done_ && queue_.wants_window() && refill_window()) continue;
      return;
    }
    submit(std::move(next->first), next->second);
  }
}

void BatchRunner::write_error(const LineError& error) {
  errors_->append(error_record(error));
  ++counts_.done;
  ++counts_.errors;
  ++summary_.failed;
}

void BatchRunner::submit(BatchRequest&& request, const Ticket& ticket) {
  const uint64_t line = request.line;
  auto running = std::make_unique<RunningRequest>();
  running->ticket = ticket;
  running->header = api::make_response_header(request.spec.endpoint, options_.model_id);
  running->request = std::move(request);
  RunningRequest& r = *running;
  const api::GenerationSpec& spec = r.request.spec;
  std::vector<RequestId> ids;
  try {
    // Events are read on this thread, so none is looked up before its id is stored below.
    ids = api::submit_choices(engine_, spec, [this](size_t) { return events_; });
  } catch (const api::ApiError& e) {
    // The aborted choices' events name ids choices_ never had, so they are ignored.
    write_error(line_error(r.request, e));
    queue_.started(ticket);  // whoever waited for its prefix computes it themselves
    return;
  }
  r.choices.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) choices_[ids[i]] = {&r, i};
  r.remaining = r.choices.size();
  running_.emplace(line, std::move(running));
}

void BatchRunner::on_event(TokenEvent&& event) {
  const auto it = choices_.find(event.request_id);
  if (it == choices_.end()) return;
  RunningRequest& r = *it->second.request;
  if (!r.started) {
    r.started = true;
    queue_.started(r.ticket);
  }
  api::ChoiceOutcome& choice = r.choices[it->second.choice];
  const bool finished = event.finished;
  const int32_t seen = choice.tokens_seen;
  choice.add(std::move(event), r.request.spec.logprobs);
  counts_.generated_tokens += choice.tokens_seen - seen;  // live, for the progress line
  if (!finished) return;
  choices_.erase(it);
  // The engine's count is the reference (it also counts a token that ended the choice).
  counts_.generated_tokens += choice.completion_tokens - choice.tokens_seen;
  counts_.prompt_tokens += choice.prompt_tokens;
  counts_.cached_tokens += choice.cached_prompt_tokens;
  if (--r.remaining == 0) finish(r.request.line);
}

void BatchRunner::finish(uint64_t line) {
  const auto it = running_.find(line);
  const RunningRequest& r = *it->second;
  const FinishedRecord record =
      finished_record(r.request, r.header, r.choices, engine_.tokenizer());
  if (record.is_error) {
    errors_->append(record.text);
    ++counts_.errors;
    ++summary_.failed;
  } else {
    output_->append(record.text);
    ++summary_.succeeded;
  }
  ++counts_.done;
  running_.erase(it);
}

BatchSummary BatchRunner::run() {
  const TimePoint start = Clock::now();
  for (;;) {
    // Keep the engine's queue full: it admits what fits each step, we only keep it fed.
    submit_ready();
    if (choices_.empty() && input_done_) {
      if (queue_.held() == 0) break;
      fail(ErrorCode::kInternal, "{} batch requests wait for a request that never ran",
           queue_.held());
    }
    TokenEvent event;
    if (events_->pop(event, std::chrono::milliseconds(250))) {
      on_event(std::move(event));
      // Take whatever else is ready before refilling, so submits come in bursts.
      while (events_->pop(event, std::chrono::milliseconds(0))) on_event(std::move(event));
    }
    if (progress_) progress_->update(counts_);
  }
  output_->sync();
  errors_->sync();
  if (progress_) progress_->finish(counts_);
  if (plan_.orphaned_records > 0) {
    spdlog::warn("{} records answer requests this input does not have (was the input changed?)",
                 plan_.orphaned_records);
  }
  summary_.prompt_tokens = counts_.prompt_tokens;
  summary_.cached_tokens = counts_.cached_tokens;
  summary_.generated_tokens = counts_.generated_tokens;
  summary_.seconds = seconds_between(start, Clock::now());
  return summary_;
}

}  // namespace

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::kAuto;
  if (text == "bar") return ProgressMode::kBar;
  if (text == "lines") return ProgressMode::kLines;
  if (text == "off") return ProgressMode::kOff;
  fail(ErrorCode::kInvalidArgument, "--progress must be auto, bar, lines or off, got '{}'", text);
}

std::string default_errors_path(const std::string& output) {
  constexpr std::string_view kExt = ".jsonl";
  if (output.ends_with(kExt)) {
    return output.substr(0, output.size() - kExt.size()) + ".errors.jsonl";
  }
  return output + ".errors.jsonl";
}

int default_in_flight(const EngineOptions& engine) {
  return std::max(4 * engine.max_seqs, 64);
}

BatchSummary run_batch(Engine& engine, const BatchOptions& options) {
  BatchRunner runner(engine, options);
  return runner.run();
}

}  // namespace rapide::batch
