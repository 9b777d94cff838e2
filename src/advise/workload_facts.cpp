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

WorkloadFacts workload_facts(const EngineState& state, const bench::RunResult* run) {
  WorkloadFacts f;
  std::vector<double> outputs, prompts;
  if (run != nullptr) {
    f.from_bench = true;
    const bench::RunSummary& s = run->summary;
    f.requests = static_cast<int>(s.completed);
    f.ttft_mean = s.ttft.mean;
    f.ttft_p50 = s.ttft.p50;
    f.tpot_p50 = s.tpot.p50;
    f.itl_p50 = s.itl.p50;
    f.itl_p99 = s.itl.p99;
    f.output_throughput = s.output_throughput;
    f.duration = s.duration;
    const bench::ArrivalPattern& a = run->arrival;
    f.all_at_once = a.rate > 0 && std::isinf(a.rate);
    f.users = a.rate <= 0 ? a.concurrency : 0;
    f.latency_target = !s.slo.empty() || !f.all_at_once;
    for (const bench::RequestRecord& r : run->records) {
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
    f.itl_p50 = f.tpot_p50;  // the engine does not keep per-token gaps
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
  if (f.itl_p99 == 0 && state.step_totals.mixed.steps > 0) {
    f.itl_p99 = state.step_totals.mixed.max_seconds;  // a stalled token waits a mixed step
  }
  return f;
}

}  // namespace rapide::advise
