// The Engine: one thread that owns the scheduler, the KV cache and the model, and turns
// submitted requests into streams of token events. Every front end (CLI, HTTP server,
// offline batch) talks to it through submit / abort / stats, all thread-safe.
//
// A step is plan -> run the model -> sample -> update (engine/step.h): the Scheduler plans
// and owns sequence state, the ModelRunner runs the forward pass, the OutputProcessor samples
// and talks to clients. The engine records every step's and request's timings itself
// (EngineStats.recent_steps, TokenEvent.metrics); a step observer sees each plan and result.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "engine/background_task.h"
#include "engine/engine_options.h"
#include "engine/engine_stats.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/prefix_sharing.h"
#include "engine/remote_prefill.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/step.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide {

class Engine {
 public:
  // The model and tokenizer must outlive the engine. Starts the engine thread. `draft`, a
  // smaller model with the same vocabulary (checked: Error(kInvalidArgument) naming the first
  // differing token), turns on speculation with it (--spec draft, the default with one).
  Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& options,
         const DraftModel* draft = nullptr);
  ~Engine();  // aborts whatever is still queued or running, then joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. Throws Error: kInvalidArgument (empty prompt, token id
  // out of range, invalid sampling values, a grammar whose initial state is over the per-token
  // work limit), kOutOfRange (prompt does not fit the context),
  // kExceedsCapacity (prompt + max_tokens could never fit the whole KV budget: a 400, not a
  // retry), kResourceExhausted (the queue is full: retry later), kUnavailable (draining).
  // Events then arrive on request.sink.
  RequestId submit(Request request);
  // submit's checks of one request, without queueing it (kInvalidArgument, kOutOfRange,
  // kExceedsCapacity): a front end refuses a request that can never run before accepting
  // others, and `rapide batch` reports a line's error when it reads the line.
  void check_admissible(std::span<const int32_t> prompt, const SamplingParams& sampling) const;
  // Refuses (kInvalidArgument) a request's speculation settings the engine cannot honour: a
  // proposer it was not started with (say "draft" without a draft model) or more guesses per
  // step than --spec-tokens / its auto ceiling allow. Part of submit's checks.
  void check_speculation(const SpecOverride& spec) const;
  // Submits requests that arrive together: the scheduler sees all of them at its next step
  // (or none, if any is invalid). Same errors as submit.
  std::vector<RequestId> submit_all(std::vector<Request> requests);
  // Ends the request with FinishReason::kAbort and frees its KV blocks at the next step.
  // Unknown or already finished ids are ignored.
  void abort(RequestId id);
  // Stops accepting requests and waits until everything in flight has finished, or until
  // `timeout`, after which the rest are aborted. Returns true if all finished.
  bool drain(std::chrono::milliseconds timeout);

  // Queues `task` to run on the engine thread between steps, a slice at a time
  // (engine/background_task.h). Throws Error(kUnavailable) once the engine is stopping.
  void run_between_steps(std::unique_ptr<BackgroundTask> task);

  EngineStats stats() const;
  // The last prompts submitted, oldest first (token ids; at most kPromptSampleTokens of each,
  // from its start): the advisor reads them with the prompt lint's rules to tell why prompts
  // that look alike miss the prefix cache (advise/prompt_lint.h). Kept out of stats(), which
  // is copied often.
  static constexpr size_t kRecentPrompts = 32;
  static constexpr size_t kPromptSampleTokens = 4096;
  std::vector<std::vector<int32_t>> recent_prompts() const;
  // Called on the engine thread after every step with its plan, result and figures (the
  // advisor's record, replay, tests). Set before the first submit; must not block.
  using StepObserver = std::function<void(const StepPlan&, const StepResult&, const StepStats&)>;
  void set_step_observer(StepObserver observer);
  // Prefill/decode disaggregation (engine/remote_prefill.h): from now on a request whose
  // prompt has full blocks before its last token that the prefix cache does not hold waits
  // for `remote` to compute them, adopts them into the prefix cache, then runs as usual
  // (only the last partial block is computed here). A request whose K/V do not arrive within
  // `timeout` fails with ErrorCode::kUnavailable (a 503), as do all once `remote` reports its
  // link failed. Prompts shorter than `min_prompt_tokens` are computed here: a short prefill
  // costs the token streams less than the round trip costs the request. Call before the
  // first submit; `remote` must outlive the engine. Throws Error(kInvalidArgument) when
  // prefix caching is off (the adopted blocks live there).
  void set_remote_prefill(RemotePrefill* remote, std::chrono::milliseconds timeout,
                          int min_prompt_tokens = 0);
  const ModelConfig& config() const { return model_.config(); }
  // What a decode step reads (roofline figures) and the weights' parameter count, whose
  // ratio says how the weights are stored (4 bytes: F32, 2: F16, ~1.06: Q8_0).
  uint64_t weight_bytes() const { return model_.weight_bytes(); }
  uint64_t matmul_parameters() const { return model_.matmul_parameters(); }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const EngineOptions& options() const { return options_; }
  int max_context() const { return max_context_; }

 private:
  // A validated request: its scheduling state and its output state.
  struct Incoming {
    std::unique_ptr<Sequence> sequence;
    RequestOutputState output;
    // Set by abort(): the grammar's mask walk polls it (a structured-output request only).
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  Incoming prepare(Request request);  // submit's checks, then the request's two halves
  std::vector<RequestId> enqueue(std::vector<Incoming>& requests);
  void loop();
  void step();
  void handle_aborts(std::vector<RequestId>& aborts);
  // One slice of the background task whose turn it is (none: nothing).
  void run_background_slice();
  // Fails the requests the scheduler found unable to progress (an engine bug: they would
  // wait forever), with an internal error, logged.
  void fail_stalled();
  // Counts requests that ended into stats_ and sends their final events.
  void finish_outside_step(const std::vector<FinishedRequest>& finished);
  void count_finished(const std::vector<FinishedRequest>& finished);  // mutex_ held
  // The proposer --spec asks for (null when off).
  std::unique_ptr<Proposer> make_proposer(const DraftModel* draft);
  // Disaggregation, on the engine thread. send_for_prefill takes the sequence (returns true)
  // when it waits for remote K/V or failed at once; poll_remote_prefill adopts what arrived
  // and fails what timed out.
  bool send_for_prefill(std::unique_ptr<Sequence>& sequence);
  void poll_remote_prefill();
  void adopt_prefilled(PrefilledKv& kv);
  // The final report of a request that never reached the scheduler.
  static FinishedRequest end_unscheduled(const Sequence& s, FinishReason reason, std::string error,
                                         ErrorCode code);
  void fail_awaiting_all(const std::string& error);
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
  // The vocabulary's byte trie for grammar masks, built by the first constrained request.
  std::once_flag token_trie_once_;
  std::optional<grammar::TokenTrie> token_trie_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PagedKvStore> kv_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // after kv_: it listens to kv_'s pool
  std::unique_ptr<Proposer> proposer_;         // null with speculation off
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<OutputProcessor> outputs_;
  std::unique_ptr<PrefixSharingProbe> sharing_;  // guarded by mutex_
  StepObserver observer_;
  // Disaggregation: requests whose prompt K/V the remote prefill computes (engine thread).
  struct AwaitingKv {
    std::unique_ptr<Sequence> sequence;
    TimePoint sent;
  };
  RemotePrefill* remote_ = nullptr;  // set under mutex_ before the first submit
  std::chrono::milliseconds remote_timeout_{30000};
  int remote_min_prompt_ = 0;
  std::unordered_map<RequestId, AwaitingKv> awaiting_kv_;
  std::string remote_failure_;  // the link's error once it failed: later requests fail too
  // Between-steps work (engine thread), in round-robin order: the front runs next.
  std::deque<std::unique_ptr<BackgroundTask>> tasks_;

  mutable std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_;
  std::vector<Incoming> incoming_;
  std::vector<RequestId> aborts_;
  std::vector<std::unique_ptr<BackgroundTask>> incoming_tasks_;
  // Structured-output requests' cancellation flags, so abort() reaches a mask walk that holds
  // up the current step. Weak: a request's grammar state owns its flag; expired entries are
  // dropped when the map has doubled since the last sweep.
  std::unordered_map<RequestId, std::weak_ptr<std::atomic<bool>>> cancel_flags_;
  size_t cancel_flags_sweep_at_ = 64;
  bool stopping_ = false;
  bool draining_ = false;
  EngineStats stats_;
  std::deque<std::vector<int32_t>> recent_prompts_;
  std::condition_variable drained_;

  std::atomic<RequestId> next_id_{1};
  std::atomic<uint64_t> arrivals_{0};
  std::thread thread_;
};

}  // namespace rapide
