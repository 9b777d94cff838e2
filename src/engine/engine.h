// The Engine: one thread that owns the scheduler, the KV cache and the model, and turns
// submitted requests into streams of token events. Every front end (CLI, HTTP server,
// offline batch) talks to it through submit / abort / stats, all thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine_options.h"
#include "engine/engine_stats.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide {

class Engine {
 public:
  // The model and tokenizer must outlive the engine. Starts the engine thread.
  Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& options);
  ~Engine();  // aborts whatever is still queued or running, then joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. Throws Error: kInvalidArgument (empty prompt, token id
  // out of range, invalid sampling values), kOutOfRange (prompt does not fit the context),
  // kExceedsCapacity (prompt + max_tokens could never fit the whole KV budget: a 400, not a
  // retry), kResourceExhausted (the queue is full: retry later), kUnavailable (draining).
  // Events then arrive on request.sink.
  RequestId submit(Request request);
  // submit's checks of one request, without queueing it (kInvalidArgument, kOutOfRange,
  // kExceedsCapacity): a front end refuses a request that can never run before accepting
  // others, and `rapide batch` reports a line's error when it reads the line.
  void check_admissible(std::span<const int32_t> prompt, const SamplingParams& sampling) const;
  // Submits requests that arrive together: the scheduler sees all of them at its next step
  // (or none, if any is invalid). Same errors as submit.
  std::vector<RequestId> submit_all(std::vector<Request> requests);
  // Ends the request with FinishReason::kAbort and frees its KV blocks at the next step.
  // Unknown or already finished ids are ignored.
  void abort(RequestId id);
  // Stops accepting requests and waits until everything in flight has finished, or until
  // `timeout`, after which the rest are aborted. Returns true if all finished.
  bool drain(std::chrono::milliseconds timeout);

  EngineStats stats() const;
  const ModelConfig& config() const { return model_.config(); }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const EngineOptions& options() const { return options_; }
  int max_context() const { return max_context_; }

 private:
  // Validates a request and builds its sequence (submit's checks).
  std::unique_ptr<Sequence> prepare(Request request);
  std::vector<RequestId> enqueue(std::vector<std::unique_ptr<Sequence>>& sequences);
  void loop();
  void step();
  void handle_aborts(std::vector<RequestId>& aborts);
  // Samples every row of the step that has logits (not the padded ones) into sampled_.
  void sample_all(const SchedulerOutput& plan, std::span<const float> logits);
  // Takes a sequence's sampled token; a finished one leaves the scheduler (its blocks
  // freed) before its final event is sent.
  void advance(Sequence& s, const SampleResult& r);
  void finish(Sequence* s, FinishReason reason, const std::string& error = {});
  // Sends the last event of a sequence that has already left the scheduler.
  void emit_final(Sequence& s, TokenEvent& event, FinishReason reason);
  // Builds the prefix cache and its offload tier from the options (null when off).
  std::unique_ptr<PrefixCache> make_prefix_cache(const KvLayout& layout);
  // Copies the prefix cache's counters into stats_ and explains new partial misses
  // (called with mutex_ held).
  void update_prefix_stats();

  Model& model_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  int max_context_;
  std::vector<int32_t> end_of_generation_ids_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PagedKvStore> kv_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // after kv_: it listens to kv_'s pool
  std::unique_ptr<Scheduler> scheduler_;
  Batch batch_;
  struct Row {
    Sequence* sequence;
    const float* logits;
  };
  struct Sampled {
    SampleResult result;
    std::string error;  // set when the sampler failed
  };
  std::vector<Row> rows_;                           // this step's rows to sample
  std::vector<Sampled> sampled_;                    // their results, in the same order
  std::vector<std::vector<float>> logits_scratch_;  // one logits row per pool thread

  mutable std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Sequence>> incoming_;
  std::vector<RequestId> aborts_;
  bool stopping_ = false;
  bool draining_ = false;
  EngineStats stats_;
  std::condition_variable drained_;

  std::atomic<RequestId> next_id_{1};
  std::atomic<uint64_t> arrivals_{0};
  std::thread thread_;
};

}  // namespace rapide
