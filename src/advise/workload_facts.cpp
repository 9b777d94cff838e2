#include "advise/workload_facts.h"

#include <algorithm>
#include <cmath>

#include "base/percentile.h"

namespace rapide::advise {

namespace {

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

double cv_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  if (v.size() < 2 || m <= 0) return 0.0;
  double ss = 0;
  for (const double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1)) / m;
}

}  // namespace

StepCost fit_decode_cost(const EngineState& state) {
  // Least squares over the recorded decode-only steps; verification rows cost like decode
  // rows, so a step's rows are its sequences plus its guesses.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const StepRecord& s : state.steps) {
    if (s.prefill_tokens != 0 || s.sequences == 0) continue;
    const double x = s.sequences + s.draft_tokens;
    n += 1;
    sx += x;
    sy += s.seconds;
    sxx += x * x;
    sxy += x * s.seconds;
  }
  StepCost c;
  c.samples = static_cast<int>(n);
  if (n == 0) return c;
  c.mean_rows = sx / n;
  const double var = sxx / n - (sx / n) * (sx / n);
  if (var > 0.25) {
    c.per_row = std::max(0.0, (sxy / n - (sx / n) * (sy / n)) / var);
  }
  c.fixed = sy / n - c.per_row * c.mean_rows;
  return c;
}

PrefillCost fit_prefill_cost(const EngineState& state, const StepCost& decode) {
  PrefillCost c;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const StepRecord& s : state.steps) {
    if (s.prefill_tokens == 0) continue;
    c.smallest = c.smallest == 0 ? s.prefill_tokens : std::min(c.smallest, s.prefill_tokens);
    c.largest = std::max(c.largest, s.prefill_tokens);
    const double x = s.prefill_tokens;
    const double y = s.seconds - decode.per_row * (s.decode_tokens + s.draft_tokens);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  c.samples = static_cast<int>(n);
  if (n == 0 || sx <= 0) return c;
  const double mean_x = sx / n, mean_y = sy / n;
  const double var = sxx / n - mean_x * mean_x;
  // Chunks spanning half their mean or more tell the intercept apart (a narrow span
  // extrapolates noise, and attention makes the curve bend within it).
  if (n >= 5 && c.largest - c.smallest >= 0.5 * mean_x && var > 0) {
    c.per_token = (sxy / n - mean_x * mean_y) / var;
    c.fixed = mean_y - c.per_token * mean_x;
    c.varied = c.per_token > 0 && c.fixed >= 0;
  }
  if (!c.varied) {
    c.fixed = std::clamp(decode.fixed, 0.0, mean_y);
    c.per_token = std::max(0.0, (mean_y - c.fixed) / mean_x);
  }
  return c;
}

WorkloadFacts workload_facts(const EngineState& state, const loadgen::RunResult* run) {
  WorkloadFacts f;
  std::vector<double> outputs, prompts;
  if (run != nullptr) {
    f.from_bench = true;
    const loadgen::RunSummary& s = run->summary;
    f.requests = static_cast<int>(s.completed);
    f.ttft_mean = s.ttft.mean;
    f.ttft_p50 = s.ttft.p50;
    f.tpot_p50 = s.tpot.p50;
    f.itl_p50 = s.itl.p50;
    f.itl_p99 = s.itl.p99;
    f.output_throughput = s.output_throughput;
    f.duration = s.duration;
    const loadgen::ArrivalPattern& a = run->arrival;
    f.all_at_once = a.rate > 0 && std::isinf(a.rate);
    f.users = a.rate <= 0 ? a.concurrency : 0;
    f.latency_target = !s.slo.empty() || !f.all_at_once;
    for (const loadgen::RequestRecord& r : run->records) {
      if (!r.ok()) continue;
      outputs.push_back(r.output_tokens);
      prompts.push_back(r.prompt_tokens);
    }
  } else {
    std::vector<double> ttft, tpot;
    double first = 0, last = 0;
    for (const RequestSummary& r : state.requests) {
      if (r.finish == "abort" || r.finish == "error") continue;
      outputs.push_back(r.completion_tokens);
      prompts.push_back(r.prompt_tokens);
      ttft.push_back(r.ttft);
      if (r.completion_tokens >= 2) tpot.push_back(r.tpot);
      last = std::max(last, r.arrival + r.e2e);
      first = std::min(first, r.arrival);
    }
    f.requests = static_cast<int>(outputs.size());
    f.ttft_mean = mean_of(ttft);
    f.ttft_p50 = median(ttft);
    f.tpot_p50 = median(tpot);
    f.duration = last - first;
    double tokens = 0;
    for (const double o : outputs) tokens += o;
    f.output_throughput = f.duration > 0 ? tokens / f.duration : 0.0;
    f.latency_target = true;  // a live server: someone waits for the answer
  }
  // Without a bench run: the most requests present at once, running or waiting.
  if (f.users == 0) {
    f.users = std::max(1, state.step_totals.max_running + state.step_totals.max_waiting);
  }
  f.prompt_mean = mean_of(prompts);
  f.output_mean = mean_of(outputs);
  f.output_cv = cv_of(outputs);
  const StepKindTotals& d = state.step_totals.decode_only;
  f.decode_rows = d.mean_rows();
  f.decode_step = d.mean_seconds();
  f.cost = fit_decode_cost(state);
  if (state.machine.read_bandwidth > 0) {
    f.roofline_step = static_cast<double>(state.model.weight_bytes) / state.machine.read_bandwidth;
  }
  // Without a client's record: a decoding sequence waits from one step's end to the next's.
  std::vector<double> gaps, decode_steps;
  double decode_seconds = 0, forward_seconds = 0;
  for (size_t i = 0; i < state.steps.size(); ++i) {
    const StepRecord& r = state.steps[i];
    if (r.prefill_tokens == 0 && r.sequences > 0) {
      decode_steps.push_back(r.seconds);
      if (r.forward_seconds > 0) {
        decode_seconds += r.seconds;
        forward_seconds += std::min(r.forward_seconds, r.seconds);
      }
    }
    if (i == 0 || r.decode_tokens == 0) continue;
    const StepRecord& p = state.steps[i - 1];
    const double gap = (r.start + r.seconds) - (p.start + p.seconds);
    for (int t = 0; t < r.decode_tokens; ++t) gaps.push_back(gap);
  }
  f.decode_step_p99 = percentile(decode_steps, 99.0);
  f.decode_forward_share = decode_seconds > 0 ? forward_seconds / decode_seconds : 0.0;
  if (f.itl_p99 == 0 && !gaps.empty()) {
    f.itl_from_steps = true;
    f.itl_p50 = median(gaps);
    f.itl_p99 = percentile(gaps, 99.0);
  }
  std::vector<double> queues;
  int64_t lookup_hits = 0;
  for (const RequestSummary& r : state.requests) {
    if (r.finish == "abort" || r.finish == "error") continue;
    queues.push_back(r.queue);
    f.lookup_tokens += r.lookup_tokens;
    lookup_hits += r.lookup_hits;
  }
  f.queue_mean = mean_of(queues);
  f.lookup_share = f.lookup_tokens ? static_cast<double>(lookup_hits) / f.lookup_tokens : 0.0;
  if (state.step_totals.min_free_blocks >= 0) {
    f.peak_used_blocks = state.config.kv_total_blocks - state.step_totals.min_free_blocks;
  }
  return f;
}

}  // namespace rapide::advise
