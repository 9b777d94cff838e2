#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace rapide::serve {

namespace {

// Latency buckets from 1 ms to 60 s: token latencies on a CPU sit in the low milliseconds,
// TTFT under load in seconds.
std::vector<double> latency_bounds() {
  return {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15,
          0.2,   0.3,    0.5,   0.75,   1.0,  1.5,   2.5,  5.0,  10.0, 20.0,  60.0};
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void sample(std::string& out, const char* name, const char* type, const char* help, T value) {
  header(out, name, type, help);
  fmt::format_to(std::back_inserter(out), "{} {}\n", name, value);
}

// Adds `label` (name="value") first to every sample line of an exposition: one rule for
// every family, so none can be missed. Comment lines (# HELP / # TYPE) are kept as they are.
std::string with_label(const std::string& text, const std::string& label) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    if (line.empty() || line[0] == '#') {
      out += line;
    } else {
      const size_t cut = line.find_first_of("{ ");
      out += line.substr(0, cut);
      if (cut != std::string_view::npos && line[cut] == '{') {
        out += '{';
        out += label;
        out += ',';
        out += line.substr(cut + 1);
      } else {
        out += '{';
        out += label;
        out += '}';
        if (cut != std::string_view::npos) out += line.substr(cut);
      }
    }
    out += '\n';
    start = end + 1;
  }
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket]++;
  sum_ += value;
  count_++;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i],
                   cumulative);
  }
  fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n",
                 name, count_, name, sum_, name, count_);
}

ServeMetrics::ServeMetrics()
    : ttft_(latency_bounds()),
      tpot_(latency_bounds()),
      itl_(latency_bounds()),
      e2e_(latency_bounds()) {}

void ServeMetrics::observe_sequence(const SequenceObservation& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  const TimePoint now = Clock::now();
  if (r.ttft >= 0) {
    ttft_.observe(r.ttft);
    recent_ttft_.add(now, r.ttft);
  }
  if (r.tpot >= 0) {
    tpot_.observe(r.tpot);
    recent_tpot_.add(now, r.tpot);
  }
  if (r.e2e >= 0) e2e_.observe(r.e2e);
  prompt_tokens_seen_ += static_cast<uint64_t>(r.prompt_tokens);
  cached_prompt_tokens_ += static_cast<uint64_t>(r.cached_prompt_tokens);
  if (r.kv_transfer.remote) {
    kv_transfer_requests_++;
    kv_transfer_bytes_ += r.kv_transfer.bytes;
    kv_transfer_seconds_ += r.kv_transfer.transfer_seconds;
    kv_wait_seconds_ += r.kv_transfer.wait_seconds;
  }
}

void ServeMetrics::observe_status(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_[{endpoint, status}]++;
}

void ServeMetrics::observe_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  itl_.observe(seconds);
  recent_itl_.add(Clock::now(), seconds);
}

void ServeMetrics::connection_opened() {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_++;
}

void ServeMetrics::connection_closed() {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_--;
}

void ServeMetrics::request_started() {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_++;
}

void ServeMetrics::request_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_--;
}

int64_t ServeMetrics::requests_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_;
}

RecentLatency ServeMetrics::recent_latency(double window_seconds) const {
  std::unique_lock<std::mutex> lock(mutex_);
  const LatencyWindow ttft = recent_ttft_, tpot = recent_tpot_, itl = recent_itl_;
  lock.unlock();
  const TimePoint now = Clock::now();
  return {ttft.percentiles(now, window_seconds), tpot.percentiles(now, window_seconds),
          itl.percentiles(now, window_seconds)};
}

void ServeMetrics::set_model_name(std::string name) {
  std::string escaped;
  for (char c : name) {
    if (c == '\\' || c == '"') escaped += '\\';
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped += c;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  model_label_ = fmt::format("model_name=\"{}\"", escaped);
}

std::string ServeMetrics::render(const EngineStats* engine, int state) const {
  std::string label;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    label = model_label_;
  }
  return label.empty() ? render_samples(engine, state)
                       : with_label(render_samples(engine, state), label);
}

std::string ServeMetrics::render_samples(const EngineStats* engine, int state) const {
  std::string out;
  out.reserve(8192);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    header(out, "rapide_requests_total", "counter", "HTTP requests by endpoint and status");
    for (const auto& [key, count] : requests_) {
      fmt::format_to(std::back_inserter(out),
                     "rapide_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first,
                     key.second, count);
    }
    header(out, "rapide_time_to_first_token_seconds", "histogram",
           "arrival to first generated token");
    ttft_.render("rapide_time_to_first_token_seconds", out);
    header(out, "rapide_time_per_output_token_seconds", "histogram",
           "mean time per output token after the first, per request");
    tpot_.render("rapide_time_per_output_token_seconds", out);
    header(out, "rapide_inter_token_latency_seconds", "histogram",
           "time between consecutive tokens of a request");
    itl_.render("rapide_inter_token_latency_seconds", out);
    header(out, "rapide_e2e_request_latency_seconds", "histogram",
           "arrival to last token of a request");
    e2e_.render("rapide_e2e_request_latency_seconds", out);
    sample(out, "rapide_prefix_cache_hit_tokens_total", "counter",
           "prompt tokens served from the prefix cache", cached_prompt_tokens_);
    const double hit_rate = prompt_tokens_seen_ == 0
                                ? 0.0
                                : static_cast<double>(cached_prompt_tokens_) / prompt_tokens_seen_;
    sample(out, "rapide_prefix_cache_hit_rate", "gauge",
           "share of prompt tokens served from the prefix cache", hit_rate);
    sample(out, "rapide_kv_transfer_requests_total", "counter",
           "requests whose prompt K/V came from the prefill rank (disaggregation)",
           kv_transfer_requests_);
    sample(out, "rapide_kv_transfer_bytes_total", "counter",
           "KV bytes received from the prefill rank", kv_transfer_bytes_);
    sample(out, "rapide_kv_transfer_seconds_total", "counter",
           "seconds spent receiving K/V from the prefill rank", kv_transfer_seconds_);
    sample(out, "rapide_kv_wait_seconds_total", "counter",
           "seconds requests waited for their prompt K/V (prefill, queue and transfer)",
           kv_wait_seconds_);
    sample(out, "rapide_http_connections", "gauge", "open HTTP connections", connections_);
    sample(out, "rapide_requests_in_flight", "gauge", "HTTP requests not yet fully answered",
           in_flight_);
  }
  sample(out, "rapide_server_state", "gauge", "0 loading, 1 ready, 2 draining", state);
  if (!engine) return out;
  const EngineStats& e = *engine;
  sample(out, "rapide_queue_length", "gauge", "requests waiting to be scheduled", e.waiting);
  sample(out, "rapide_running_sequences", "gauge", "sequences being generated", e.running);
  sample(out, "rapide_engine_background_tasks", "gauge",
         "work the engine runs between steps (embeddings, the bandwidth probe)",
         e.background_tasks);
  const int batch = e.recent_steps.empty() ? 0 : e.recent_steps.back().sequences;
  sample(out, "rapide_batch_size", "gauge", "sequences in the last forward pass", batch);
  double recent_batch = 0.0;
  for (const StepStats& s : e.recent_steps) recent_batch += s.sequences;
  if (!e.recent_steps.empty()) recent_batch /= static_cast<double>(e.recent_steps.size());
  sample(out, "rapide_batch_size_recent_mean", "gauge",
         "mean sequences per forward pass over the recent steps", recent_batch);
  sample(out, "rapide_kv_blocks_total", "gauge", "KV cache blocks", e.kv.total_blocks);
  sample(out, "rapide_kv_blocks_used", "gauge", "KV cache blocks held by sequences",
         e.kv.used_blocks);
  sample(out, "rapide_kv_blocks_free", "gauge", "KV cache blocks free (cached included)",
         e.kv.free_blocks);
  sample(out, "rapide_preemptions_total", "counter", "sequences preempted for KV space",
         e.preemptions);
  sample(out, "rapide_prompt_tokens_total", "counter", "prompt tokens of finished requests",
         e.prompt_tokens);
  sample(out, "rapide_computed_prompt_tokens_total", "counter",
         "prompt positions computed (recomputation included)", e.computed_prompt_tokens);
  sample(out, "rapide_generation_tokens_total", "counter", "generated tokens", e.generated_tokens);
  sample(out, "rapide_engine_steps_total", "counter", "forward passes", e.steps);
  sample(out, "rapide_engine_requests_aborted_total", "counter", "requests aborted",
         e.requests_aborted);
  if (e.spec_enabled) {
    const SpecStats& sp = e.spec;
    sample(out, "rapide_spec_verifications_total", "counter",
           "decode steps of a sequence that verified speculative guesses", sp.verifications);
    sample(out, "rapide_spec_proposed_tokens_total", "counter", "speculative guesses verified",
           sp.proposed);
    sample(out, "rapide_spec_accepted_tokens_total", "counter", "speculative guesses accepted",
           sp.accepted);
    sample(out, "rapide_spec_acceptance_rate", "gauge", "accepted / proposed guesses",
           sp.acceptance_rate());
    sample(out, "rapide_spec_mean_accepted_length", "gauge", "guesses accepted per verification",
           sp.mean_accepted());
    sample(out, "rapide_spec_off_decisions_total", "counter",
           "decode steps where auto chose no speculation (below break-even)", sp.off_decisions);
    sample(out, "rapide_spec_chosen_tokens", "gauge", "the latest guess count chosen", sp.last_k);
    header(out, "rapide_spec_accepted_length", "histogram", "guesses accepted per verification");
    uint64_t cumulative = 0;
    for (size_t a = 0; a < sp.accepted_histogram.size(); ++a) {
      cumulative += sp.accepted_histogram[a];
      out += fmt::format("rapide_spec_accepted_length_bucket{{le=\"{}\"}} {}\n", a, cumulative);
    }
    out += fmt::format("rapide_spec_accepted_length_bucket{{le=\"+Inf\"}} {}\n", cumulative);
    out += fmt::format("rapide_spec_accepted_length_sum {}\n", sp.accepted);
    out += fmt::format("rapide_spec_accepted_length_count {}\n", cumulative);
  }
  return out;
}

}  // namespace rapide::serve
