// The engine thread's loop: arrivals, aborts, background tasks and disaggregation's remote
// prefills between steps, requests that end outside a step, and the stall check.
#include "engine/engine.h"

#include <algorithm>
#include <cstring>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/logging.h"
#include "engine/model_identity.h"
#include "kv/memory_budget.h"

namespace rapide {

namespace {
constexpr size_t kRecentRequests = 256;
// How often an idle engine looks for remote K/V: short next to a prefill, long enough that
// the waiting engine leaves the core to the prefill rank on a small machine.
constexpr auto kRemotePollInterval = std::chrono::microseconds(200);
}  // namespace

void Engine::loop() {
  std::vector<Incoming> arrived;
  std::vector<RequestId> aborts;
  std::vector<std::unique_ptr<BackgroundTask>> new_tasks;
  for (;;) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto ready = [this] {
        return stopping_ || !incoming_.empty() || !aborts_.empty() || !scheduler_->idle() ||
               !incoming_tasks_.empty() || !tasks_.empty();
      };
      if (awaiting_kv_.empty()) {
        wake_.wait(lock, ready);
      } else {
        wake_.wait_for(lock, kRemotePollInterval, ready);  // remote K/V arrive unannounced
      }
      stop = stopping_;
      arrived.swap(incoming_);
      aborts.swap(aborts_);
      new_tasks.swap(incoming_tasks_);
    }
    for (std::unique_ptr<BackgroundTask>& task : new_tasks) tasks_.push_back(std::move(task));
    new_tasks.clear();
    for (Incoming& in : arrived) {
      outputs_->add(in.sequence->id, std::move(in.output));
      if (!send_for_prefill(in.sequence)) scheduler_->add_waiting(std::move(in.sequence));
    }
    arrived.clear();
    if (stop) {
      // Shutting down: everything still queued or running ends as aborted.
      std::vector<FinishedRequest> ended = scheduler_->finish_all(FinishReason::kAbort);
      for (const auto& [id, a] : awaiting_kv_) {
        ended.push_back(
            end_unscheduled(*a.sequence, FinishReason::kAbort, {}, ErrorCode::kCancelled));
      }
      awaiting_kv_.clear();
      finish_outside_step(ended);
      for (std::unique_ptr<BackgroundTask>& task : tasks_) {
        task->abandon("the server is shutting down");
      }
      tasks_.clear();
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.waiting = stats_.running = 0;
      stats_.running_sequences.clear();
      stats_.background_tasks = 0;
      drained_.notify_all();
      return;
    }
    if (remote_ != nullptr) poll_remote_prefill();
    handle_aborts(aborts);
    if (!scheduler_->idle()) step();
    run_background_slice();
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.background_tasks = static_cast<int>(tasks_.size());
    stats_.waiting = static_cast<int>(scheduler_->waiting_count() + awaiting_kv_.size());
    stats_.running = static_cast<int>(scheduler_->running_count());
    stats_.running_sequences = scheduler_->running_summary();
    stats_.kv = kv_->usage();
    update_prefix_stats();
    if (incoming_.empty() && scheduler_->idle() && awaiting_kv_.empty()) drained_.notify_all();
  }
}

void Engine::run_background_slice() {
  if (tasks_.empty()) return;
  std::unique_ptr<BackgroundTask> task = std::move(tasks_.front());
  tasks_.pop_front();
  bool over = true;
  try {
    over = task->run_slice(*pool_);
  } catch (const std::exception& e) {
    spdlog::error("engine: a between-steps task failed: {}", e.what());
    task->abandon(e.what());
  }
  if (!over) tasks_.push_back(std::move(task));  // its next slice after the others'
}

void Engine::handle_aborts(std::vector<RequestId>& aborts) {
  std::vector<FinishedRequest> finished;
  for (RequestId id : aborts) {
    if (auto f = scheduler_->finish(id, FinishReason::kAbort)) {
      finished.push_back(std::move(*f));
    } else if (auto a = awaiting_kv_.find(id); a != awaiting_kv_.end()) {
      finished.push_back(
          end_unscheduled(*a->second.sequence, FinishReason::kAbort, {}, ErrorCode::kCancelled));
      awaiting_kv_.erase(a);
    }
  }
  aborts.clear();
  if (!finished.empty()) finish_outside_step(finished);
}

bool Engine::send_for_prefill(std::unique_ptr<Sequence>& s) {
  // The prefill rank runs the model alone: an adapter's prompt is computed here.
  if (remote_ == nullptr || s->prompt_length < remote_min_prompt_ || s->adapter >= 0) return false;
  const int bs = options_.kv_block_size;
  const int blocks = (s->prompt_length - 1) / bs;  // the last token is always computed here
  if (blocks == 0) return false;
  prefix_cache_->extend_hashes(s->tokens, s->block_hashes);
  if (prefix_cache_->match(s->tokens, s->block_hashes).blocks() >= blocks) return false;
  if (remote_failure_.empty()) {
    try {
      remote_->request(s->id, std::span<const int32_t>(s->tokens).first(
                                  static_cast<size_t>(blocks) * static_cast<size_t>(bs)));
      s->kv_transfer.remote = true;
      const RequestId id = s->id;
      awaiting_kv_.emplace(id, AwaitingKv{std::move(s), Clock::now()});
      return true;
    } catch (const Error& e) {
      remote_failure_ = e.what();
      spdlog::error("disaggregation: the prefill rank is unreachable: {}", remote_failure_);
    }
  }
  finish_outside_step({end_unscheduled(*s, FinishReason::kError,
                                       "the prefill rank is unreachable: " + remote_failure_,
                                       ErrorCode::kUnavailable)});
  return true;
}

void Engine::poll_remote_prefill() {
  // Also with nothing awaited: late frames of timed-out requests are taken off the link.
  std::vector<PrefilledKv> arrived;
  try {
    arrived = remote_->poll();
  } catch (const Error& e) {
    remote_failure_ = e.what();
    spdlog::error("disaggregation: the prefill rank is unreachable: {}", remote_failure_);
    fail_awaiting_all("the prefill rank is unreachable: " + remote_failure_);
    return;
  }
  for (PrefilledKv& kv : arrived) adopt_prefilled(kv);
  const TimePoint now = Clock::now();
  std::vector<FinishedRequest> late;
  for (auto it = awaiting_kv_.begin(); it != awaiting_kv_.end();) {
    if (now - it->second.sent < remote_timeout_) {
      ++it;
      continue;
    }
    const std::string error = fmt::format(
        "no KV from the prefill rank within {} ms (--disagg-timeout-ms): it is overloaded, "
        "stopped or gone",
        remote_timeout_.count());
    spdlog::error("request {}: {}", it->first, error);
    late.push_back(end_unscheduled(*it->second.sequence, FinishReason::kError, error,
                                   ErrorCode::kUnavailable));
    it = awaiting_kv_.erase(it);
  }
  if (!late.empty()) finish_outside_step(late);
}

void Engine::adopt_prefilled(PrefilledKv& kv) {
  const auto it = awaiting_kv_.find(kv.request_id);
  if (it == awaiting_kv_.end()) return;  // aborted or timed out meanwhile
  Sequence& s = *it->second.sequence;
  KvTransferReport& report = s.kv_transfer;
  report.bytes = kv.wire_bytes;
  report.transfer_seconds = kv.transfer_seconds;
  report.prefill_seconds = kv.prefill_seconds;
  report.prefill_rank = kv.prefill_rank;
  if (!kv.error.empty()) {
    spdlog::warn("request {}: the prefill rank failed ({}); computing the prompt here", s.id,
                 kv.error);
  } else if (kv.identity != prefix_cache_->identity() ||
             kv.block_bytes != kv_->pool().block_bytes()) {
    spdlog::warn(
        "request {}: K/V from another model or KV layout (identity {:016x}, here {:016x}); "
        "computing the prompt here: start both ranks with the same model and KV flags",
        s.id, kv.identity, prefix_cache_->identity());
  } else {
    const size_t tokens = kv.hashes.size() * static_cast<size_t>(options_.kv_block_size);
    report.blocks = prefix_cache_->adopt(
        std::span<const int32_t>(s.tokens).first(std::min(tokens, s.tokens.size())), kv.hashes,
        kv.blocks);
  }
  report.wait_seconds = seconds_between(s.timings.arrival, Clock::now());
  spdlog::debug("request {}: {} KV blocks ({} bytes) adopted, transfer {:.3f} ms, waited {:.1f} ms",
                s.id, report.blocks, report.bytes, report.transfer_seconds * 1e3,
                report.wait_seconds * 1e3);
  scheduler_->add_waiting(std::move(it->second.sequence));
  awaiting_kv_.erase(it);
}

FinishedRequest Engine::end_unscheduled(const Sequence& s, FinishReason reason, std::string error,
                                        ErrorCode code) {
  FinishedRequest f;
  f.request_id = s.id;
  f.reason = reason;
  f.error = std::move(error);
  f.error_code = code;
  f.prompt_tokens = s.prompt_length;
  f.timings = s.timings;
  f.timings.finished = Clock::now();
  f.kv_transfer = s.kv_transfer;
  return f;
}

void Engine::fail_awaiting_all(const std::string& error) {
  std::vector<FinishedRequest> failed;
  for (const auto& [id, a] : awaiting_kv_) {
    failed.push_back(
        end_unscheduled(*a.sequence, FinishReason::kError, error, ErrorCode::kUnavailable));
  }
  awaiting_kv_.clear();
  if (!failed.empty()) finish_outside_step(failed);
}

void Engine::count_finished(const std::vector<FinishedRequest>& finished) {
  for (const FinishedRequest& f : finished) {
    if (f.reason == FinishReason::kAbort) {
      stats_.requests_aborted++;
    } else if (f.reason == FinishReason::kError) {
      stats_.requests_failed++;
    } else {
      stats_.requests_finished++;
    }
    stats_.prompt_tokens += static_cast<uint64_t>(f.prompt_tokens);
    stats_.generated_tokens += static_cast<uint64_t>(f.completion_tokens);
    if (stats_.recent_requests.size() >= kRecentRequests) {
      stats_.recent_requests.erase(stats_.recent_requests.begin());
    }
    stats_.recent_requests.push_back(f);
  }
  stats_.kv = kv_->usage();
}

void Engine::finish_outside_step(const std::vector<FinishedRequest>& finished) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    count_finished(finished);
  }
  for (const FinishedRequest& f : finished) outputs_->emit_final(f);
}

void Engine::fail_stalled() {
  std::vector<FinishedRequest> failed;
  for (Scheduler::Stalled& stalled : scheduler_->take_stalled()) {
    const std::string error =
        "internal error: the engine made no progress on this request: " + stalled.why;
    spdlog::error("request {}: {}", stalled.id, error);
    if (auto f = scheduler_->finish(stalled.id, FinishReason::kError, error)) {
      f->error_code = ErrorCode::kInternal;
      failed.push_back(std::move(*f));
    }
  }
  if (!failed.empty()) finish_outside_step(failed);
}

}  // namespace rapide
