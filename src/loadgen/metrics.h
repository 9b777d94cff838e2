// From raw per-request records to the figures of a run: throughput, latency percentiles,
// goodput. Pure functions of the records, so tests can feed exact timestamps.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loadgen/request_record.h"
#include "loadgen/slo.h"

namespace rapide::loadgen {

// Summary of one latency distribution, in seconds.
struct Distribution {
  size_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};
Distribution describe(std::vector<double> values);

struct RunSummary {
  size_t requests = 0;
  size_t completed = 0;
  size_t failed = 0;
  std::map<std::string, size_t> failures;  // error kind name -> count
  double duration = 0;                     // first send to last response end, seconds
  int64_t prompt_tokens = 0;               // of completed requests
  int64_t output_tokens = 0;
  double request_throughput = 0;      // completed requests per second
  double output_throughput = 0;       // output tokens per second
  double total_token_throughput = 0;  // prompt + output tokens per second
  Distribution ttft, tpot, itl, e2e;
  Slo slo;
  size_t good = 0;     // completed requests meeting the SLO (all of them without one)
  double goodput = 0;  // good requests per second
};

// Failed requests count in `failed` and `failures` only; latencies and tokens come from the
// completed ones. TPOT covers requests with at least two output tokens.
RunSummary summarize(const std::vector<RequestRecord>& records, const Slo& slo);

}  // namespace rapide::loadgen
