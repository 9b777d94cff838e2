// The engine's intake, on the callers' threads: admission checks (prompt, sampling, grammar,
// speculation), turning a Request into a Sequence with its output state, and the queue the
// engine thread takes arrivals and aborts from.
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
// Matcher steps the admission check may spend on a grammar's first mask on the submitting
// thread (~20-40 ms of a 32000-token vocabulary's walk): realistic schemas' first masks take
// 70-200 k (constraint.h), so they are checked at admission; costlier ones at the first step.
constexpr uint64_t kAdmissionMaskWork = 250'000;
}  // namespace

RequestId Engine::submit(Request request) {
  std::vector<Incoming> one;
  one.push_back(prepare(std::move(request)));
  return enqueue(one).front();
}

std::vector<RequestId> Engine::submit_all(std::vector<Request> requests) {
  std::vector<Incoming> prepared;
  for (Request& r : requests) prepared.push_back(prepare(std::move(r)));
  return enqueue(prepared);
}

void Engine::check_admissible(std::span<const int32_t> prompt,
                              const SamplingParams& sampling) const {
  const int vocab = model_.config().vocab_size;
  const int prompt_length = static_cast<int>(prompt.size());
  if (prompt_length == 0) fail(ErrorCode::kInvalidArgument, "the prompt is empty");
  for (int32_t token : prompt) {
    if (token < 0 || token >= vocab) {
      fail(ErrorCode::kInvalidArgument, "prompt token id {} is outside the vocabulary (0..{})",
           token, vocab - 1);
    }
  }
  if (prompt_length >= max_context_) {
    fail(ErrorCode::kOutOfRange,
         "the prompt has {} tokens but the context holds {} (prompt + at least 1 generated)",
         prompt_length, max_context_);
  }
  sampling.validate(vocab);
  const int final_length =
      prompt_length + std::min(sampling.max_tokens, max_context_ - prompt_length);
  if (!kv_->can_ever_fit(final_length)) {
    fail(ErrorCode::kExceedsCapacity,
         "the request needs {} KV blocks for {} tokens but the whole KV budget ({}) holds {}; "
         "raise --kv-memory or lower max_tokens",
         kv_->blocks_for_new_sequence(final_length), final_length,
         format_bytes(static_cast<uint64_t>(kv_->total_blocks()) * kv_->layout().block_bytes()),
         kv_->total_blocks());
  }
}

void Engine::check_speculation(const SpecOverride& spec) const {
  const SpecMode running = proposer_ != nullptr ? options_.spec.mode : SpecMode::kOff;
  if (spec.mode && *spec.mode != SpecMode::kOff && *spec.mode != running) {
    fail(ErrorCode::kInvalidArgument, "speculative.mode '{}' is not available: {}",
         spec_mode_name(*spec.mode),
         *spec.mode == SpecMode::kDraft
             ? std::string("no draft model is loaded (start the server with --draft-model)")
             : fmt::format("the server runs speculation '{}' (--spec)", spec_mode_name(running)));
  }
  const int most = std::max(options_.spec.tokens, options_.spec.max_tokens);
  if (spec.tokens && *spec.tokens > most) {
    fail(ErrorCode::kInvalidArgument,
         "speculative.tokens {} exceeds the server's limit of {} guesses per step", *spec.tokens,
         most);
  }
}

Engine::Incoming Engine::prepare(Request request) {
  check_admissible(request.prompt, request.sampling);
  check_speculation(request.speculative);
  if (request.adapter < -1 || request.adapter >= model_.lora_count()) {
    fail(ErrorCode::kInvalidArgument, "adapter index {} is not one of the model's {} adapters",
         request.adapter, model_.lora_count());
  }
  const int vocab = model_.config().vocab_size;
  const int prompt_length = static_cast<int>(request.prompt.size());
  Incoming in;
  in.output.sampler = std::make_unique<Sampler>(request.sampling, vocab, end_of_generation_ids_);
  in.output.sink = std::move(request.sink);
  if (request.stream_text) {
    in.output.detokenizer.emplace(tokenizer_, /*skip_leading_space=*/false);
    if (!request.sampling.stop.empty()) in.output.stop_checker.emplace(request.sampling.stop);
    if (request.tool_calls) in.output.tool_calls.emplace(*request.tool_calls);
  }
  auto s = std::make_unique<Sequence>();
  s->max_generated = std::min(request.sampling.max_tokens, max_context_ - prompt_length);
  s->id = next_id_.fetch_add(1);
  s->kv_id = static_cast<int32_t>(s->id & 0x7fffffff);
  s->priority = request.priority;
  s->adapter = request.adapter;
  if (request.adapter >= 0) s->prefix_chain = adapter_identity(model_.lora(request.adapter));
  s->arrival_order = arrivals_.fetch_add(1);
  s->tokens = std::move(request.prompt);
  s->prompt_length = prompt_length;
  s->timings.arrival = Clock::now();
  if (request.sampling.constraint) {
    std::call_once(token_trie_once_, [this] {
      token_trie_.emplace(grammar::make_token_trie(tokenizer_, end_of_generation_ids_));
    });
    in.cancelled = std::make_shared<std::atomic<bool>>(false);
    const uint64_t work = options_.grammar_work_per_token != 0
                              ? options_.grammar_work_per_token
                              : grammar::default_work_per_token(*token_trie_);
    try {  // the initial state: admission's cost model keeps it far below the limit
      in.output.grammar.emplace(request.sampling.constraint, *token_trie_,
                                grammar::GrammarLimits{.work_per_token = work}, in.cancelled);
    } catch (const Error& e) {
      // A grammar problem, not the KV budget that kExceedsCapacity means to a front end.
      fail(ErrorCode::kInvalidArgument, "{}", e.what());
    }
    // A vocabulary without a token that can start the required text (a schema's "{" in a
    // vocabulary that has no "{" and no byte fallback) would fail at the first step: refuse
    // the request now, as the request's fault. This runs on the submitting thread, where a
    // walk cannot be aborted, so it gets a small budget of its own: a first mask that costs
    // more is left to the first step, which enforces the real limit and honours aborts.
    // The mask lands in the constraint's cache, so the first step reuses it.
    bool startable = true;
    try {
      grammar::GrammarState probe(
          request.sampling.constraint, *token_trie_,
          grammar::GrammarLimits{.work_per_token = std::min(work, kAdmissionMaskWork)},
          in.cancelled);
      startable = probe.mask().allowed > 0;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kExceedsCapacity)
        fail(ErrorCode::kInvalidArgument, "{}", e.what());
    }
    if (!startable) {
      fail(ErrorCode::kUnsupported,
           "grammar: no token of the model's vocabulary can start the output the grammar "
           "requires (the vocabulary cannot spell it)");
    }
    s->constrained = true;
  }
  s->spec = request.speculative;
  if (options_.spec.mode == SpecMode::kDraft && !request.sampling.is_greedy() &&
      !request.sampling.constraint) {
    // The draft samples its guesses as the target samples (same processors, temperature and
    // truncation) but from a stream of its own: the verification's draws stay the target's.
    SamplingParams draft = request.sampling;
    draft.seed = request.sampling.seed ^ 0x9e3779b97f4a7c15ull;
    draft.logprobs = false;
    draft.top_logprobs = 0;
    draft.n_probs = 0;
    s->draft_sampler = std::make_unique<Sampler>(draft, vocab, end_of_generation_ids_);
  }
  in.sequence = std::move(s);
  return in;
}

std::vector<RequestId> Engine::enqueue(std::vector<Incoming>& requests) {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || draining_) fail(ErrorCode::kUnavailable, "the engine is shutting down");
    const size_t queued = incoming_.size() + static_cast<size_t>(stats_.waiting);
    if (queued + requests.size() > static_cast<size_t>(options_.max_queue)) {
      fail(ErrorCode::kResourceExhausted, "the request queue is full ({} waiting)", queued);
    }
    for (auto& r : requests) {
      ids.push_back(r.sequence->id);
      if (r.cancelled) cancel_flags_[r.sequence->id] = r.cancelled;
      sharing_->observe(r.sequence->tokens);
      stats_.prefix_sharing = sharing_->stats();
      const std::vector<int32_t>& prompt = r.sequence->tokens;
      if (recent_prompts_.size() >= kRecentPrompts) recent_prompts_.pop_front();
      recent_prompts_.emplace_back(
          prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(
                                               std::min(prompt.size(), kPromptSampleTokens)));
      incoming_.push_back(std::move(r));
      stats_.requests_submitted++;
    }
    if (cancel_flags_.size() >= cancel_flags_sweep_at_) {
      std::erase_if(cancel_flags_, [](const auto& entry) { return entry.second.expired(); });
      cancel_flags_sweep_at_ = std::max<size_t>(64, 2 * cancel_flags_.size());
    }
  }
  wake_.notify_all();
  return ids;
}

void Engine::abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborts_.push_back(id);
    // A mask walk in progress sees it now, not at the end of the step.
    if (const auto it = cancel_flags_.find(id); it != cancel_flags_.end()) {
      if (const auto flag = it->second.lock()) flag->store(true, std::memory_order_relaxed);
      cancel_flags_.erase(it);
    }
  }
  wake_.notify_all();
}

bool Engine::drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  const bool done = drained_.wait_for(lock, timeout, [this] {
    return incoming_.empty() && stats_.waiting == 0 && stats_.running == 0;
  });
  if (done) return true;
  stopping_ = true;  // the loop aborts the rest and exits
  lock.unlock();
  wake_.notify_all();
  return false;
}

void Engine::run_between_steps(std::unique_ptr<BackgroundTask> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) fail(ErrorCode::kUnavailable, "the engine is shutting down");
    incoming_tasks_.push_back(std::move(task));
  }
  wake_.notify_all();
}

}  // namespace rapide
