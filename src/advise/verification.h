// `rapide advise --verify`: a lever's predicted effect against the effect measured by running
// the same workload with the lever off (A) and on (B). The prediction was made from A's
// figures; B predicted is A measured scaled by the predicted relative change.
//
//   verified       B measured is within 35 % of B predicted, and the change has the
//                  predicted sign and is within 35 % of the predicted relative change (a
//                  37 -> 8 preemption result against a predicted 0 is not verified: 8 is not
//                  within 35 % of 0)
//   right sign     the predicted sign, another size
//   not verified   no change, or the opposite one: the advice did not hold on this workload
#pragma once

#include <string>
#include <vector>

#include "advise/advisor.h"
#include "advise/engine_state.h"
#include "loadgen/metrics.h"

namespace rapide::advise {

// The metric as `rapide bench` (and, for preemptions, the engine) measured it.
double measure(Metric metric, const loadgen::RunSummary& summary, const EngineState& state);

enum class VerifyVerdict { kVerified, kRightSign, kNotVerified };
const char* verify_verdict_name(VerifyVerdict verdict);

struct Verification {
  std::string lever;   // the finding's id
  std::string change;  // its flags
  Metric metric = Metric::kTpotP50;
  double predicted_before = 0, predicted_after = 0;
  double measured_before = 0, measured_after = 0;
  double ratio = 0;  // measured change / predicted change
  VerifyVerdict verdict = VerifyVerdict::kNotVerified;
  std::string note;  // e.g. the acceptance speculation measured
  int pairs = 1;     // A/B pairs run; the measured figures are their medians
};

Verification judge(const Finding& finding, double measured_before, double measured_after);

std::string format_verifications(const std::vector<Verification>& rows);
nlohmann::json verifications_to_json(const std::vector<Verification>& rows);

}  // namespace rapide::advise
