#include "loadgen/metrics.h"

#include "base/percentile.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rapide::loadgen {

Distribution describe(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = values.size();
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(d.count);
  d.p50 = percentile_of_sorted(values, 50);
  d.p90 = percentile_of_sorted(values, 90);
  d.p95 = percentile_of_sorted(values, 95);
  d.p99 = percentile_of_sorted(values, 99);
  d.max = values.back();
  return d;
}

RunSummary summarize(const std::vector<RequestRecord>& records, const Slo& slo) {
  RunSummary s;
  s.slo = slo;
  s.requests = records.size();
  std::vector<double> ttft, tpot, itl, e2e;
  double first_send = 0, last_end = 0;
  bool any = false;
  for (const RequestRecord& r : records) {
    const double end = r.send_time + r.end_time;
    if (!any || r.send_time < first_send) first_send = r.send_time;
    if (!any || end > last_end) last_end = end;
    any = true;
    if (!r.ok()) {
      ++s.failed;
      ++s.failures[error_kind_name(r.error)];
      continue;
    }
    ++s.completed;
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    if (r.ttft() >= 0) ttft.push_back(r.ttft());
    if (r.tpot() >= 0) tpot.push_back(r.tpot());
    const std::vector<double> gaps = r.inter_token_latencies();
    itl.insert(itl.end(), gaps.begin(), gaps.end());
    e2e.push_back(r.e2e());
    if (meets_slo(r, slo)) ++s.good;
  }
  s.duration = any ? last_end - first_send : 0.0;
  if (s.duration > 0) {
    s.request_throughput = static_cast<double>(s.completed) / s.duration;
    s.output_throughput = static_cast<double>(s.output_tokens) / s.duration;
    s.total_token_throughput = static_cast<double>(s.prompt_tokens + s.output_tokens) / s.duration;
    s.goodput = static_cast<double>(s.good) / s.duration;
  }
  s.ttft = describe(std::move(ttft));
  s.tpot = describe(std::move(tpot));
  s.itl = describe(std::move(itl));
  s.e2e = describe(std::move(e2e));
  return s;
}

}  // namespace rapide::loadgen
