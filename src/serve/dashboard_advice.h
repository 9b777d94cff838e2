// The advisor's current findings for the dashboard: `rapide advise` run on the live engine
// state, at most once per `period` however many pages poll, and never on an io thread (the
// caller runs refresh() on a worker). Between refreshes every poll gets the same JSON.
//
// The machine facts skip the read-bandwidth probe (a second of the engine's threads reading
// 1 GiB, which would stall serving); question 1's roofline then reads "not assessed", as
// documented, and GET /v1/engine/state with `rapide advise --url` gives the full answer.
#pragma once

#include <nlohmann/json.hpp>

#include <mutex>
#include <optional>

#include "advise/engine_state.h"
#include "base/clock.h"
#include "engine/engine.h"

namespace rapide::serve {

class DashboardAdvice {
 public:
  explicit DashboardAdvice(double period_seconds = 5.0) : period_(period_seconds) {}
  // Re-runs the advisor when the last run is older than the period; cheap otherwise.
  void refresh(const Engine& engine);
  // advice_to_json of the latest run; null JSON before the first.
  nlohmann::json latest() const;

 private:
  double period_;
  mutable std::mutex mutex_;
  std::optional<TimePoint> last_run_;
  std::optional<advise::MachineFacts> machine_;
  nlohmann::json latest_;
  bool running_ = false;  // one refresh at a time; concurrent callers keep the old answer
};

}  // namespace rapide::serve
