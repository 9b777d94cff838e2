#include "engine/request.h"

namespace rapide {

RequestMetrics request_metrics(const RequestTimings& t, int32_t completion_tokens) {
  RequestMetrics m;
  const bool scheduled = t.first_scheduled != TimePoint{};
  if (scheduled) m.queue_seconds = seconds_between(t.arrival, t.first_scheduled);
  if (completion_tokens > 0) {
    m.ttft_seconds = seconds_between(t.arrival, t.first_token);
    if (scheduled) m.prefill_seconds = seconds_between(t.first_scheduled, t.first_token);
  }
  if (completion_tokens > 1) {
    m.tpot_seconds = seconds_between(t.first_token, t.finished) / (completion_tokens - 1);
  }
  m.e2e_seconds = seconds_between(t.arrival, t.finished);
  return m;
}

void EventQueue::on_event(TokenEvent&& event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

bool EventQueue::pop(TokenEvent& event, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return false;
  event = std::move(events_.front());
  events_.pop_front();
  return true;
}

}  // namespace rapide
