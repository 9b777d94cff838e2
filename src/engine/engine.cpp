#include "engine/engine.h"

#include <algorithm>
#include <cstring>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/logging.h"
#include "engine/model_identity.h"
#include "kv/default_kv_budget.h"
#include "kv/memory_budget.h"

namespace rapide {

namespace {
constexpr size_t kRecentSteps = 256;
constexpr size_t kRecentMisses = 32;
constexpr size_t kRecentRequests = 256;
// How often an idle engine looks for remote K/V: short next to a prefill, long enough that
// the waiting engine leaves the core to the prefill rank on a small machine.
constexpr auto kRemotePollInterval = std::chrono::microseconds(200);
}  // namespace

Engine::Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& options,
               const DraftModel* draft)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  const ModelConfig& c = model_.config();
  max_context_ = options_.max_context > 0 ? options_.max_context : c.max_context;
  if (max_context_ > c.max_context) {
    spdlog::warn(
        "engine: context {} is beyond the model's trained {}; rope extrapolates and "
        "output quality may drop",
        max_context_, c.max_context);
  }
  model_.set_serving_context(max_context_);  // LongRoPE's factor set follows the context
  if (options_.max_batch_tokens < 1 || options_.max_seqs < 1 || options_.prefill_chunk < 1) {
    fail(ErrorCode::kInvalidArgument,
         "--max-batch-tokens, --max-seqs and --prefill-chunk must be at least 1");
  }
  for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id) {
    if (tokenizer_.is_end_of_generation(id)) end_of_generation_ids_.push_back(id);
  }
  const int threads = options_.threads > 0 ? options_.threads : physical_core_count();
  pool_ = std::make_unique<ThreadPool>(threads);
  const KvLayout layout = KvLayout::for_model(c, options_.kv_block_size, options_.kv_type);
  // Checked against the machine at once (an explicit size too), rather than after a long
  // stall in the allocator and then bad_alloc.
  const KvDemand demand{
      layout.block_bytes(), layout.block_size, max_context_,
      options_.kv_auto_sequences > 0 ? options_.kv_auto_sequences : options_.max_seqs};
  const KvBudgetChoice kv_budget =
      choose_kv_budget(options_.kv_memory, demand, read_machine_memory(), options_.kv_auto_cap);
  if (kv_budget.automatic) spdlog::info("engine: kv memory auto: {}", kv_budget.explanation);
  kv_ = PagedKvStore::with_budget(layout, kv_budget.bytes, max_context_, options_.kv_layout);
  if (c.every_layer_window() > 0 && options_.batching == BatchingMode::kContinuous) {
    // One step adds a prefill chunk, or a decode token and its guesses, to a sequence.
    const int guesses = std::max(options_.spec.tokens, options_.spec.max_tokens);
    kv_->set_sliding_window(c.every_layer_window(),
                            std::max(options_.prefill_chunk, 1 + std::max(0, guesses)));
  }
  stats_.kv = kv_->usage();  // the budget is known before the first step (GET /v1/engine/state)
  prefix_cache_ = make_prefix_cache(layout);
  sharing_ =
      std::make_unique<PrefixSharingProbe>(options_.kv_block_size, model_identity(model_, layout));
  proposer_ = make_proposer(draft);
  scheduler_ = std::make_unique<Scheduler>(options_, *kv_, prefix_cache_.get(), proposer_.get());
  if (draft != nullptr && proposer_ != nullptr && model_.matmul_parameters() > 0) {
    scheduler_->set_draft_work_ratio(static_cast<double>(draft->model.matmul_parameters()) /
                                     static_cast<double>(model_.matmul_parameters()));
  }
  runner_ = std::make_unique<ModelRunner>(model_, *kv_, *pool_);
  outputs_ = std::make_unique<OutputProcessor>(tokenizer_, c.vocab_size, *pool_);
  spdlog::info(
      "engine: {} KV blocks of {} tokens ({} layout, {}), context {}, batching {}, "
      "max {} tokens / {} sequences per step, {} threads",
      kv_->total_blocks(), options_.kv_block_size, kv_layout_mode_name(options_.kv_layout),
      format_bytes(static_cast<uint64_t>(kv_->total_blocks()) * layout.block_bytes()), max_context_,
      batching_mode_name(options_.batching), options_.max_batch_tokens, options_.max_seqs, threads);
  if (proposer_ != nullptr) {
    stats_.spec_enabled = true;
    spdlog::info(
        "engine: speculative decoding, {} proposer ({} guesses per step{})", proposer_->name(),
        options_.spec.tokens < 0 ? fmt::format("auto up to {}", options_.spec.max_tokens)
                                 : std::to_string(options_.spec.tokens),
        options_.spec.mode == SpecMode::kNgram
            ? fmt::format(", n-gram {}..{}", options_.spec.ngram_min, options_.spec.ngram_max)
            : std::string());
  }
  thread_ = std::thread([this] { loop(); });
}

std::unique_ptr<Proposer> Engine::make_proposer(const DraftModel* draft) {
  if (draft != nullptr && options_.spec.mode == SpecMode::kOff)
    options_.spec.mode = SpecMode::kDraft;
  switch (options_.spec.mode) {
    case SpecMode::kOff:
      return nullptr;
    case SpecMode::kNgram:
      return std::make_unique<NgramProposer>(options_.spec.ngram_min, options_.spec.ngram_max);
    case SpecMode::kDraft:
      if (draft == nullptr) {
        fail(ErrorCode::kInvalidArgument, "--spec draft needs a draft model (--draft-model)");
      }
      check_same_vocabulary(tokenizer_, draft->tokenizer);
      // As many blocks as the target's KV: every sequence the target holds fits the draft.
      return std::make_unique<DraftModelProposer>(
          draft->model, *pool_, kv_->total_blocks(), options_.kv_block_size, max_context_,
          options_.kv_type, options_.spec.draft_min_confidence, prefix_cache_ != nullptr);
  }
  return nullptr;
}

std::unique_ptr<PrefixCache> Engine::make_prefix_cache(const KvLayout& layout) {
  if (!options_.prefix_cache) return nullptr;
  if (options_.kv_layout != KvLayoutMode::kPaged) {
    spdlog::info("engine: prefix caching is off: it needs --kv-layout paged");
    return nullptr;
  }
  const uint64_t identity = model_identity(model_, layout);
  OffloadTierOptions tier;
  const auto size_or_zero = [](const std::string& text) -> uint64_t {
    return text.empty() || text == "0" ? 0 : parse_memory_budget(text);
  };
  tier.ram_bytes = size_or_zero(options_.kv_offload_ram);
  tier.dir = options_.kv_offload_dir;
  tier.disk_bytes = tier.dir.empty() ? 0 : size_or_zero(options_.kv_offload_size);
  tier.codec = options_.kv_offload_codec;
  // Compression and file writes run on the tier's worker thread, not inside the step.
  tier.background = true;
  // Tensor/pipeline followers repeat the step's block copies (they ride on each published
  // pass), but they have no tier of their own: a block offloaded from the leader's shard
  // could not come back on theirs.
  const bool distributed =
      model_.tensor_parallel() != nullptr || model_.pipeline_parallel() != nullptr;
  if (tier.enabled() && distributed) {
    spdlog::warn("engine: the KV offload tier is off: not supported with --tp / --pp yet");
    tier = OffloadTierOptions{};
  }
  std::unique_ptr<OffloadTier> offload;
  if (tier.enabled()) {
    offload = std::make_unique<OffloadTier>(tier, layout, identity);
    spdlog::info("engine: KV offload tier: {} compressed RAM ({}), {}",
                 format_bytes(tier.ram_bytes), offload_codec_name(tier.codec),
                 tier.dir.empty() ? std::string("no files")
                                  : fmt::format("files in {} up to {}", tier.dir,
                                                format_bytes(offload->options().disk_bytes)));
  }
  spdlog::info("engine: prefix caching on (model identity {:016x})", identity);
  // Every move of block bytes goes into the step plans (StepPlan::kv_ops).
  kv_->record_ops(true);
  return std::make_unique<PrefixCache>(*kv_, identity, std::move(offload));
}

void Engine::update_prefix_stats() {
  if (!prefix_cache_) return;
  stats_.prefix_cache_enabled = true;
  stats_.prefix_cache = prefix_cache_->stats();
  for (const PrefixDivergence& d : prefix_cache_->take_divergences()) {
    if (stats_.recent_misses.size() >= kRecentMisses) {
      stats_.recent_misses.erase(stats_.recent_misses.begin());
    }
    stats_.recent_misses.push_back(describe_miss(d, tokenizer_));
  }
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

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

void Engine::set_step_observer(StepObserver observer) {
  observer_ = std::move(observer);
}

void Engine::set_remote_prefill(RemotePrefill* remote, std::chrono::milliseconds timeout,
                                int min_prompt_tokens) {
  if (remote != nullptr && prefix_cache_ == nullptr) {
    fail(ErrorCode::kInvalidArgument,
         "prefill/decode disaggregation needs the prefix cache (the decode side adopts the "
         "prefill rank's blocks there): --prefix-cache on, --kv-layout paged, no --tp");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  remote_ = remote;
  remote_timeout_ = timeout;
  remote_min_prompt_ = min_prompt_tokens;
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
         kv_->blocks_for_new_sequence(final_length), final_length, options_.kv_memory,
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
  const int vocab = model_.config().vocab_size;
  const int prompt_length = static_cast<int>(request.prompt.size());
  Incoming in;
  in.output.sampler = std::make_unique<Sampler>(request.sampling, vocab, end_of_generation_ids_);
  in.output.sink = std::move(request.sink);
  if (request.stream_text) {
    in.output.detokenizer.emplace(tokenizer_, /*skip_leading_space=*/false);
    if (!request.sampling.stop.empty()) in.output.stop_checker.emplace(request.sampling.stop);
  }
  auto s = std::make_unique<Sequence>();
  s->max_generated = std::min(request.sampling.max_tokens, max_context_ - prompt_length);
  s->id = next_id_.fetch_add(1);
  s->kv_id = static_cast<int32_t>(s->id & 0x7fffffff);
  s->priority = request.priority;
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
    // the request now, as the request's fault. The mask is cached for the first step.
    bool startable = true;
    try {
      startable = in.output.grammar->mask().allowed > 0;
    } catch (const Error& e) {
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

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<std::vector<int32_t>> Engine::recent_prompts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {recent_prompts_.begin(), recent_prompts_.end()};
}

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
  if (remote_ == nullptr || s->prompt_length < remote_min_prompt_) return false;
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

void Engine::step() {
  const TimePoint start = Clock::now();
  StepPlan plan = scheduler_->schedule(start);
  fail_stalled();  // none of them is in the plan
  if (plan.empty()) {
    // Nothing fits right now (e.g. every block is pinned); wait for an abort or arrival.
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, std::chrono::milliseconds(1));
    return;
  }
  {
    // Before any event of this step goes out: a client that sees its first token also
    // sees the blocks it holds.
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.kv = kv_->usage();
  }
  std::span<const float> logits;
  try {
    logits = runner_->run(plan);
  } catch (const std::exception& e) {
    spdlog::error("forward pass failed: {}", e.what());
    std::vector<FinishedRequest> failed;
    for (const ScheduledSequence& s : plan.sequences) {
      if (auto f = scheduler_->finish(s.request_id, FinishReason::kError, e.what())) {
        failed.push_back(std::move(*f));
      }
    }
    finish_outside_step(failed);
    return;
  }
  const TimePoint forwarded = Clock::now();
  const StepResult result = outputs_->process(plan, logits, *scheduler_);
  const TimePoint sampled = Clock::now();
  const std::vector<FinishedRequest> finished = scheduler_->update(plan, result, sampled);

  StepStats st;
  st.step = plan.step;
  st.start = start;
  st.seconds = seconds_between(start, Clock::now());
  st.forward_seconds = seconds_between(start, forwarded);
  st.sample_seconds = seconds_between(forwarded, sampled);
  st.sequences = static_cast<int>(plan.sequences.size());
  st.prefill_tokens = plan.prefill_tokens;
  st.decode_tokens = plan.decode_tokens;
  st.preemptions = static_cast<int>(plan.preempted.size());
  st.waiting = static_cast<int>(scheduler_->waiting_count());
  st.running = static_cast<int>(scheduler_->running_count());
  st.kv_used_blocks = kv_->used_blocks();
  st.kv_free_blocks = kv_->free_blocks();
  {
    const KvUsage usage = kv_->usage();
    st.kv_cached_blocks = usage.cached_free_blocks;
    st.kv_reserved_positions = usage.reserved_positions;
    st.kv_used_positions = usage.used_positions;
  }
  for (const ScheduledSequence& s : plan.sequences) {
    st.padding_rows += s.padding ? 1 : 0;
    st.draft_tokens += static_cast<int>(s.draft_tokens.size());
  }
  // Speculation's cost model learns from decode-only steps: a prefill chunk's many cheap
  // rows would flatten the per-row cost that verification rows actually pay.
  if (plan.prefill_tokens == 0) scheduler_->observe_step_cost(plan.decode_tokens, st.seconds);
  if (plan.decode_tokens == 0) scheduler_->observe_prefill_cost(plan.prefill_tokens, st.seconds);
  {
    // Counted before the events go out: a client that sees its final event sees its blocks
    // freed and its request counted.
    std::lock_guard<std::mutex> lock(mutex_);
    count_finished(finished);
    if (proposer_ != nullptr) {
      stats_.spec = scheduler_->spec_stats();
      stats_.spec.proposer_cached_tokens = proposer_->cached_tokens();
    }
    stats_.steps++;
    stats_.preemptions += plan.preempted.size();
    stats_.computed_prompt_tokens += static_cast<uint64_t>(plan.prefill_tokens);
    stats_.decoded_tokens += static_cast<uint64_t>(plan.decode_tokens);
    if (stats_.recent_steps.size() >= kRecentSteps) {
      stats_.recent_steps.erase(stats_.recent_steps.begin());
    }
    stats_.recent_steps.push_back(st);
    stats_.step_totals.add(st.sequences, st.prefill_tokens, st.decode_tokens, st.padding_rows,
                           st.draft_tokens, st.running, st.waiting, st.kv_free_blocks, st.seconds);
  }
  // The observer hears of a step before its clients do: whoever sees a request's final
  // event can count on every step of it having been observed.
  if (observer_) observer_(plan, result, st);
  outputs_->emit(result, finished);
  fail_stalled();  // after the step's own events
}

}  // namespace rapide
