// Server metrics in the Prometheus text format (version 0.0.4).
//
// Request-level figures (status counts, TTFT / TPOT / inter-token / end-to-end latency
// histograms, prefix-cache hits) are observed by the HTTP layer as responses complete;
// engine gauges (queue, running sequences, batch size, KV blocks, preemptions, token
// counters) are read from an EngineStats snapshot at scrape time, so nothing here touches
// the engine thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_stats.h"
#include "engine/request.h"
#include "serve/latency_window.h"

namespace rapide::serve {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket / _sum / _count lines of `name`.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// One finished sequence (a choice of a request).
struct SequenceObservation {
  double ttft = -1.0;  // seconds; < 0 when no token was produced
  double tpot = -1.0;  // mean seconds per output token after the first; < 0 below 2 tokens
  double e2e = -1.0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  KvTransferReport kv_transfer;  // disaggregation: the prompt's K/V from the prefill rank
};

// Latency percentiles of the last few seconds (the dashboard); nullopt: no sample then.
struct RecentLatency {
  std::optional<LatencyPercentiles> ttft, tpot, itl;
};

class ServeMetrics {
 public:
  ServeMetrics();
  void observe_sequence(const SequenceObservation& s);
  // Counts one HTTP response; endpoint "completions", "chat.completions", "models", ...;
  // status 499 when the client went away first.
  void observe_status(const std::string& endpoint, int status);
  void observe_inter_token(double seconds);
  void connection_opened();
  void connection_closed();
  // An HTTP request handed to a handler, until its response is fully written (or the
  // connection dropped): what a drain waits for.
  void request_started();
  void request_finished();
  int64_t requests_in_flight() const;
  // Copies the sample rings under the lock and sorts outside it: the token path never waits
  // for a dashboard's poll.
  RecentLatency recent_latency(double window_seconds) const;

  // The served model's id: from now on every sample carries model_name="<id>" (the label
  // vLLM's dashboards select on), first among its labels.
  void set_model_name(std::string name);
  // The whole exposition; `state` is 0 loading, 1 ready, 2 draining.
  std::string render(const EngineStats* engine, int state) const;

 private:
  std::string render_samples(const EngineStats* engine, int state) const;

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram itl_;
  Histogram e2e_;
  LatencyWindow recent_ttft_, recent_tpot_, recent_itl_;
  uint64_t prompt_tokens_seen_ = 0;
  uint64_t cached_prompt_tokens_ = 0;
  uint64_t kv_transfer_requests_ = 0;
  uint64_t kv_transfer_bytes_ = 0;
  double kv_transfer_seconds_ = 0.0;
  double kv_wait_seconds_ = 0.0;
  int64_t connections_ = 0;
  int64_t in_flight_ = 0;
  std::string model_label_;  // `model_name="..."`, escaped; empty until set_model_name
};

}  // namespace rapide::serve
