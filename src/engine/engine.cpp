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
constexpr size_t kRecentSteps = 256;
constexpr size_t kRecentMisses = 32;
}  // namespace

Engine::Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& options)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  const ModelConfig& c = model_.config();
  max_context_ = options_.max_context > 0 ? options_.max_context : c.max_context;
  if (max_context_ > c.max_context) {
    spdlog::warn(
        "engine: context {} is beyond the model's trained {}; rope extrapolates and "
        "output quality may drop",
        max_context_, c.max_context);
  }
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
  kv_ = PagedKvStore::with_budget(layout, parse_memory_budget(options_.kv_memory), max_context_,
                                  options_.kv_layout);
  prefix_cache_ = make_prefix_cache(layout);
  scheduler_ = std::make_unique<Scheduler>(options_, *kv_, prefix_cache_.get());
  logits_scratch_.assign(static_cast<size_t>(threads), std::vector<float>(c.vocab_size));
  spdlog::info(
      "engine: {} KV blocks of {} tokens ({} layout, {}), context {}, batching {}, "
      "max {} tokens / {} sequences per step, {} threads",
      kv_->total_blocks(), options_.kv_block_size, kv_layout_mode_name(options_.kv_layout),
      format_bytes(static_cast<uint64_t>(kv_->total_blocks()) * layout.block_bytes()), max_context_,
      batching_mode_name(options_.batching), options_.max_batch_tokens, options_.max_seqs, threads);
  thread_ = std::thread([this] { loop(); });
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
  std::vector<std::unique_ptr<Sequence>> one;
  one.push_back(prepare(std::move(request)));
  return enqueue(one).front();
}

std::vector<RequestId> Engine::submit_all(std::vector<Request> requests) {
  std::vector<std::unique_ptr<Sequence>> sequences;
  for (Request& r : requests) sequences.push_back(prepare(std::move(r)));
  return enqueue(sequences);
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

std::unique_ptr<Sequence> Engine::prepare(Request request) {
  check_admissible(request.prompt, request.sampling);
  const int vocab = model_.config().vocab_size;
  const int prompt_length = static_cast<int>(request.prompt.size());
  auto s = std::make_unique<Sequence>();
  s->sampler = std::make_unique<Sampler>(request.sampling, vocab, end_of_generation_ids_);
  s->max_generated = std::min(request.sampling.max_tokens, max_context_ - prompt_length);
  s->id = next_id_.fetch_add(1);
  s->kv_id = static_cast<int32_t>(s->id & 0x7fffffff);
  s->priority = request.priority;
  s->arrival_order = arrivals_.fetch_add(1);
  s->tokens = std::move(request.prompt);
  s->prompt_length = prompt_length;
  s->sink = std::move(request.sink);
  if (request.stream_text) {
    s->detokenizer.emplace(tokenizer_, /*skip_leading_space=*/false);
    if (!request.sampling.stop.empty()) s->stop_checker.emplace(request.sampling.stop);
  }
  s->timings.arrival = Clock::now();
  return s;
}

std::vector<RequestId> Engine::enqueue(std::vector<std::unique_ptr<Sequence>>& sequences) {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || draining_) fail(ErrorCode::kUnavailable, "the engine is shutting down");
    const size_t queued = incoming_.size() + static_cast<size_t>(stats_.waiting);
    if (queued + sequences.size() > static_cast<size_t>(options_.max_queue)) {
      fail(ErrorCode::kResourceExhausted, "the request queue is full ({} waiting)", queued);
    }
    for (auto& s : sequences) {
      ids.push_back(s->id);
      incoming_.push_back(std::move(s));
      stats_.requests_submitted++;
    }
  }
  wake_.notify_all();
  return ids;
}

void Engine::abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborts_.push_back(id);
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

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Engine::loop() {
  std::vector<std::unique_ptr<Sequence>> arrived;
  std::vector<RequestId> aborts;
  for (;;) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] {
        return stopping_ || !incoming_.empty() || !aborts_.empty() || !scheduler_->idle();
      });
      stop = stopping_;
      arrived.swap(incoming_);
      aborts.swap(aborts_);
    }
    for (auto& s : arrived) scheduler_->add_waiting(std::move(s));
    arrived.clear();
    if (stop) {
      // Shutting down: everything still queued or running ends as aborted.
      for (Sequence* s : scheduler_->all()) finish(s, FinishReason::kAbort);
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.waiting = stats_.running = 0;
      drained_.notify_all();
      return;
    }
    handle_aborts(aborts);
    if (!scheduler_->idle()) step();
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.waiting = static_cast<int>(scheduler_->waiting_count());
    stats_.running = static_cast<int>(scheduler_->running_count());
    stats_.kv = kv_->usage();
    update_prefix_stats();
    if (incoming_.empty() && scheduler_->idle()) drained_.notify_all();
  }
}

void Engine::handle_aborts(std::vector<RequestId>& aborts) {
  for (RequestId id : aborts) {
    if (Sequence* s = scheduler_->find(id)) finish(s, FinishReason::kAbort);
  }
  aborts.clear();
}

void Engine::step() {
  const TimePoint start = Clock::now();
  SchedulerOutput plan = scheduler_->schedule();
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
  batch_.clear();
  for (const ScheduledWork& w : plan.work) {
    Sequence& s = *w.sequence;
    if (!s.scheduled_once) {
      s.scheduled_once = true;
      s.timings.first_scheduled = start;
    }
    for (int j = 0; j < w.n_tokens; ++j) {
      const int pos = s.num_computed + j;
      batch_.add(s.tokens[pos], s.kv_id, pos, w.needs_logits && j + 1 == w.n_tokens);
    }
  }
  std::span<const float> logits;
  try {
    logits = model_.forward(batch_, *kv_, *pool_);
  } catch (const std::exception& e) {
    spdlog::error("forward pass failed: {}", e.what());
    for (const ScheduledWork& w : plan.work) finish(w.sequence, FinishReason::kError, e.what());
    return;
  }
  sample_all(plan, logits);
  size_t next = 0;
  for (const ScheduledWork& w : plan.work) {
    Sequence& s = *w.sequence;
    s.num_computed += w.n_tokens;
    if (!w.needs_logits) continue;
    if (s.padding) {
      s.tokens.push_back(s.tokens.back());  // a padded row: computed, never sampled or sent
      continue;
    }
    Sampled& sampled = sampled_[next++];
    if (!sampled.error.empty()) {
      finish(&s, FinishReason::kError, sampled.error);
      continue;
    }
    advance(s, sampled.result);
  }

  StepStats st;
  st.start = start;
  st.seconds = seconds_between(start, Clock::now());
  st.sequences = static_cast<int>(plan.work.size());
  st.prefill_tokens = plan.prefill_tokens;
  st.decode_tokens = plan.decode_tokens;
  st.preemptions = plan.preempted;
  st.waiting = static_cast<int>(scheduler_->waiting_count());
  st.running = static_cast<int>(scheduler_->running_count());
  st.kv_used_blocks = kv_->used_blocks();
  st.kv_free_blocks = kv_->free_blocks();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.steps++;
  stats_.preemptions += plan.preempted;
  stats_.computed_prompt_tokens += plan.prefill_tokens;
  if (stats_.recent_steps.size() >= kRecentSteps) {
    stats_.recent_steps.erase(stats_.recent_steps.begin());
  }
  stats_.recent_steps.push_back(st);
}

// Samplers belong to one sequence each and read only its own history, so the rows are
// sampled in parallel (a batch of hundreds of rows spent a tenth of its step here on one
// thread); what follows a token (events, stop strings, finishing) stays in row order.
void Engine::sample_all(const SchedulerOutput& plan, std::span<const float> logits) {
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  rows_.clear();
  size_t row = 0;
  for (const ScheduledWork& w : plan.work) {
    if (!w.needs_logits) continue;
    if (!w.sequence->padding) rows_.push_back({w.sequence, logits.data() + row * vocab});
    ++row;
  }
  sampled_.resize(rows_.size());
  // A chunk is at least ~32k logits: a small vocabulary's rows stay on the calling thread.
  const int64_t grain = std::max<int64_t>(1, 32768 / static_cast<int64_t>(vocab));
  pool_->parallel_for(static_cast<int64_t>(rows_.size()), grain,
                      [&](int64_t begin, int64_t end, int thread) {
                        std::vector<float>& scratch = logits_scratch_[static_cast<size_t>(thread)];
                        for (int64_t i = begin; i < end; ++i) {
                          const Row& r = rows_[static_cast<size_t>(i)];
                          Sampled& out = sampled_[static_cast<size_t>(i)];
                          out.error.clear();
                          std::memcpy(scratch.data(), r.logits, vocab * sizeof(float));
                          try {
                            out.result = r.sequence->sampler->sample(scratch, r.sequence->tokens);
                          } catch (const std::exception& e) {
                            out.error = std::string("sampling failed: ") + e.what();
                          }
                        }
                      });
}

void Engine::advance(Sequence& s, const SampleResult& r) {
  s.tokens.push_back(r.token);
  const int generated = s.generated();
  TokenEvent event;
  event.request_id = s.id;
  event.token = r.token;
  event.index = generated - 1;
  event.time = Clock::now();
  if (generated == 1) s.timings.first_token = event.time;
  if (s.sampler->params().wants_logprobs()) {
    event.logprob = r.raw_logprob;
    event.top_logprobs.assign(r.top_logprobs.begin(), r.top_logprobs.end());
  }
  std::optional<FinishReason> reason = finish_after_token(
      s.sampler->params(), r.token, tokenizer_.is_end_of_generation(r.token), generated);
  // Stop tokens (EOS, stop_token_ids) contribute no text; every other token, including
  // the one that reaches max_tokens, goes through the detokenizer and stop strings.
  if (reason != FinishReason::kStop && s.detokenizer) {
    std::string piece = s.detokenizer->push(r.token);
    if (s.stop_checker) {
      StopOutput out = s.stop_checker->push(piece);
      event.text = std::move(out.text);
      if (out.stopped) reason = FinishReason::kStop;
    } else {
      event.text = std::move(piece);
    }
  }
  if (!reason && generated >= s.max_generated) reason = FinishReason::kLength;
  if (!reason) {
    if (s.sink) s.sink->on_event(std::move(event));
    return;
  }
  if (options_.batching == BatchingMode::kStatic) {
    emit_final(s, event, *reason);
    scheduler_->retire_to_padding(&s);
    return;
  }
  // Free the blocks before telling the client, so a finished request never holds KV.
  std::unique_ptr<Sequence> owned = scheduler_->remove(&s);
  emit_final(*owned, event, *reason);
}

void Engine::emit_final(Sequence& s, TokenEvent& event, FinishReason reason) {
  const bool stopped_by_string = s.stop_checker && s.stop_checker->stopped();
  if (s.detokenizer && !stopped_by_string) {
    std::string rest = s.detokenizer->flush();
    if (s.stop_checker) {
      StopOutput out = s.stop_checker->push(rest);
      event.text += out.text;
      if (!out.stopped) event.text += s.stop_checker->flush();
    } else {
      event.text += rest;
    }
  }
  s.timings.finished = Clock::now();
  event.finished = true;
  event.finish_reason = reason;
  event.prompt_tokens = s.prompt_length;
  event.completion_tokens = s.generated();
  event.cached_prompt_tokens = s.cached_prompt_tokens;
  event.timings = s.timings;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reason == FinishReason::kAbort) {
      stats_.requests_aborted++;
    } else if (reason == FinishReason::kError) {
      stats_.requests_failed++;
    } else {
      stats_.requests_finished++;
    }
    stats_.prompt_tokens += s.prompt_length;
    stats_.generated_tokens += s.generated();
    stats_.kv = kv_->usage();
  }
  if (s.sink) s.sink->on_event(std::move(event));
}

void Engine::finish(Sequence* s, FinishReason reason, const std::string& error) {
  TokenEvent event;
  event.request_id = s->id;
  event.time = Clock::now();
  event.error = error;
  std::unique_ptr<Sequence> owned = scheduler_->remove(s);
  if (owned->padding) return;  // its request already ended
  emit_final(*owned, event, reason);
}

}  // namespace rapide
