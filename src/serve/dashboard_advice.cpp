#include "serve/dashboard_advice.h"

#include "advise/advisor.h"

namespace rapide::serve {

void DashboardAdvice::refresh(const Engine& engine) {
  advise::MachineFacts machine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const TimePoint now = Clock::now();
    if (running_ || (last_run_ && seconds_between(*last_run_, now) < period_)) return;
    running_ = true;
    last_run_ = now;
    if (!machine_) machine_ = advise::probe_machine(engine.options().threads, false);
    machine = *machine_;
  }
  nlohmann::json answer;
  try {
    const advise::EngineState state = advise::capture_engine_state(engine, machine);
    advise::AdviseInput input;
    input.state = &state;
    answer = advise::advice_to_json(advise::advise(input));
  } catch (const std::exception& e) {
    answer = {{"error", e.what()}};
  }
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = std::move(answer);
  running_ = false;
}

nlohmann::json DashboardAdvice::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

}  // namespace rapide::serve
