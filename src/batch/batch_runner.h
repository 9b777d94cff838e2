// Runs an OpenAI Batch API input file through an Engine, resumably and exactly once.
//
// The input is streamed: a window of requests is read, ordered (prefix_order.h) and fed to
// the engine so that `in_flight` engine requests are always queued or running, far more than
// max_seqs, so the scheduler never waits for the front end and admits whatever fits. Records
// are appended as requests finish (completion order) and the two files double as the
// checkpoint journal (record_journal.h): memory stays flat whatever the input size (but for
// the input's custom_ids), and a re-run of the same command skips every request already
// answered, matched by custom_id (resume_plan.h).
#pragma once

#include <cstdint>
#include <string>

#include "batch/prefix_order.h"
#include "batch/record_journal.h"
#include "engine/engine.h"

namespace rapide::batch {

enum class ProgressMode { kAuto, kBar, kLines, kOff };
ProgressMode parse_progress_mode(const std::string& text);

struct BatchOptions {
  std::string input;
  std::string output;
  std::string errors;    // empty = default_errors_path(output)
  std::string model_id;  // bodies naming another model are refused, as the server does
  BatchOrder order = BatchOrder::kPrefix;
  size_t window = 4096;  // requests read and ordered at once
  int in_flight = 0;     // engine requests submitted and unfinished; 0 = 4 x max_seqs
  ProgressMode progress = ProgressMode::kAuto;
  double progress_interval_s = 10.0;  // period of plain progress lines
  RecordWriter::SyncPolicy sync;
  FileSyscalls* files = nullptr;  // the journal's file calls; null = the real ones
};

struct BatchSummary {
  uint64_t total_lines = 0;  // non-blank input lines
  uint64_t resumed = 0;      // answered by earlier runs
  uint64_t succeeded = 0;    // this run, to the output file
  uint64_t failed = 0;       // this run, to the errors file
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t generated_tokens = 0;
  double seconds = 0.0;
  uint64_t truncated_bytes = 0;  // torn tails repaired on resume
  uint64_t corrupt_lines = 0;    // damaged lines in the middle of the files, left in place
};

// "results.jsonl" -> "results.errors.jsonl" (any other name gets ".errors.jsonl" appended).
std::string default_errors_path(const std::string& output);

// In-flight engine requests used when BatchOptions::in_flight is 0.
int default_in_flight(const EngineOptions& engine);

// Runs every input line not yet answered. Throws Error for unusable files (unreadable
// input, output and error files that do not belong to this input) and, before anything
// runs, for duplicate custom_ids and answered requests edited since (resume_plan.h).
BatchSummary run_batch(Engine& engine, const BatchOptions& options);

}  // namespace rapide::batch
