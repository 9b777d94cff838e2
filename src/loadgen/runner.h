// Runs one workload against one backend under one arrival pattern and returns every
// request's record: the event loop of a benchmark run.
//
// Conversations are the unit of arrival: an open-loop arrival or a free closed-loop user
// starts the next conversation, whose turns then follow one another (each with the answers
// so far in its history). Single-turn workloads make this one request per arrival.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <string>
#include <vector>

#include "loadgen/arrival.h"
#include "loadgen/backend.h"
#include "loadgen/metrics.h"
#include "loadgen/workload.h"

namespace rapide::loadgen {

// What the live progress line shows.
struct Progress {
  std::string label;
  size_t total = 0;
  size_t done = 0;
  size_t failed = 0;
  size_t in_flight = 0;
  double elapsed = 0;   // seconds
  double ttft_p50 = 0;  // seconds, over completed requests so far
  double tpot_p50 = 0;
  bool final = false;  // the last call of a run
};

struct RunnerOptions {
  ArrivalPattern arrival;
  Slo slo;
  double progress_interval = 0.5;  // seconds between progress calls; <= 0: none
  std::function<void(const Progress&)> progress;
};

struct RunResult {
  std::string label;
  ArrivalPattern arrival;
  std::vector<RequestRecord> records;  // in workload order
  RunSummary summary;
};

// Runs `io` until every request finished; `io` must not be running on another thread.
RunResult run_benchmark(boost::asio::io_context& io, Backend& backend,
                        const std::vector<Conversation>& workload, const RunnerOptions& options);

}  // namespace rapide::loadgen
