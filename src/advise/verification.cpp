#include "advise/verification.h"

#include <fmt/format.h>

#include <cmath>

namespace rapide::advise {

namespace {
constexpr double kVerifyBand = 0.35;  // the ±35 % band docs/advise.md holds predictions to
}  // namespace

double measure(Metric metric, const loadgen::RunSummary& summary, const EngineState& state) {
  switch (metric) {
    case Metric::kTpotP50:
      return summary.tpot.p50;
    case Metric::kTtftMean:
      return summary.ttft.mean;
    case Metric::kItlP99:
      return summary.itl.p99;
    case Metric::kOutputThroughput:
      return summary.output_throughput;
    case Metric::kPreemptions:
      return static_cast<double>(state.counters.preemptions);
  }
  return 0.0;
}

const char* verify_verdict_name(VerifyVerdict verdict) {
  switch (verdict) {
    case VerifyVerdict::kVerified:
      return "verified";
    case VerifyVerdict::kRightSign:
      return "right sign, other size";
    case VerifyVerdict::kNotVerified:
      return "NOT verified";
  }
  return "?";
}

Verification judge(const Finding& finding, double measured_before, double measured_after) {
  Verification v;
  v.lever = finding.id;
  v.change = change_text(finding);
  v.measured_before = measured_before;
  v.measured_after = measured_after;
  if (!finding.prediction) {
    v.note = "no prediction to compare";
    return v;
  }
  v.metric = finding.prediction->metric;
  v.predicted_before = finding.prediction->before;
  v.predicted_after = finding.prediction->after;
  // Relative changes, so a prediction made from one run's figures compares with another
  // pair of runs on a noisy machine.
  const double predicted =
      v.predicted_before != 0 ? (v.predicted_after - v.predicted_before) / v.predicted_before : 0;
  const double measured =
      measured_before != 0 ? (measured_after - measured_before) / measured_before : 0;
  v.ratio = predicted != 0 ? measured / predicted : 0.0;
  if (predicted != 0 && v.ratio > 0) {
    const double predicted_b = measured_before * (1.0 + predicted);
    const bool value_in_band =
        std::abs(measured_after - predicted_b) <= kVerifyBand * std::abs(predicted_b);
    v.verdict = std::abs(v.ratio - 1.0) <= kVerifyBand && value_in_band ? VerifyVerdict::kVerified
                                                                        : VerifyVerdict::kRightSign;
  }
  return v;
}

std::string format_verifications(const std::vector<Verification>& rows) {
  std::string out =
      fmt::format("{:<24} {:<28} {:>12} {:>12} {:>12} {:>12}  {}\n", "lever", "metric",
                  "A measured", "B predicted", "B measured", "effect/pred", "verdict");
  for (const Verification& v : rows) {
    const double scale = metric_scale(v.metric);
    const double predicted_b = v.predicted_before != 0
                                   ? v.measured_before * v.predicted_after / v.predicted_before
                                   : v.predicted_after;
    out += fmt::format("{:<24} {:<28} {:>12.2f} {:>12.2f} {:>12.2f} {:>11.0f}%  {}{}\n", v.lever,
                       fmt::format("{} ({})", metric_name(v.metric), metric_unit(v.metric)),
                       v.measured_before * scale, predicted_b * scale, v.measured_after * scale,
                       v.ratio * 100.0, verify_verdict_name(v.verdict),
                       (v.pairs > 1 ? fmt::format("; medians of {} pairs", v.pairs) : "") +
                           (v.note.empty() ? "" : "; " + v.note));
  }
  return out;
}

nlohmann::json verifications_to_json(const std::vector<Verification>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const Verification& v : rows) {
    const double scale = metric_scale(v.metric);
    out.push_back({{"lever", v.lever},
                   {"change", v.change},
                   {"metric", metric_name(v.metric)},
                   {"unit", metric_unit(v.metric)},
                   {"predicted_before", v.predicted_before * scale},
                   {"predicted_after", v.predicted_after * scale},
                   {"measured_before", v.measured_before * scale},
                   {"measured_after", v.measured_after * scale},
                   {"effect_over_prediction", v.ratio},
                   {"verdict", verify_verdict_name(v.verdict)},
                   {"pairs", v.pairs},
                   {"note", v.note}});
  }
  return out;
}

}  // namespace rapide::advise
