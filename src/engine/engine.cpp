// The engine's construction (the scheduler, KV memory, prefix cache and offload tier, the
// speculative proposer, the engine thread) and what it reports. Intake: engine_intake.cpp;
// the thread's loop: engine_loop.cpp; one step: engine_step.cpp.
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
constexpr size_t kRecentMisses = 32;
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
  if (kv_budget.short_of_context) {
    if (options_.kv_layout == KvLayoutMode::kContiguous) {
      fail(ErrorCode::kExceedsCapacity,
           "kv memory auto: {}; the contiguous layout reserves a whole context per sequence, so "
           "nothing would fit: give --kv-layout paged, a shorter --ctx-size or --kv-memory SIZE",
           kv_budget.explanation);
    }
    spdlog::warn("engine: kv memory auto: {}", kv_budget.explanation);
  } else if (kv_budget.automatic) {
    spdlog::info("engine: kv memory auto: {}", kv_budget.explanation);
  }
  kv_ = PagedKvStore::with_budget(layout, kv_budget.bytes, max_context_, options_.kv_layout);
  if (c.every_layer_window() > 0 && options_.batching == BatchingMode::kContinuous) {
    // One step adds a prefill chunk, or a decode token and its guesses, to a sequence.
    const int guesses = std::max(options_.spec.tokens, options_.spec.max_tokens);
    kv_->set_sliding_window(c.every_layer_window(),
                            std::max(options_.prefill_chunk, 1 + std::max(0, guesses)));
  }
  stats_.kv = kv_->usage();  // the budget is known before the first step (GET /v1/engine/state)
  runner_ = std::make_unique<ModelRunner>(model_, *kv_, *pool_);
  prefix_cache_ = make_prefix_cache(layout);
  sharing_ =
      std::make_unique<PrefixSharingProbe>(options_.kv_block_size, model_identity(model_, layout));
  proposer_ = make_proposer(draft);
  scheduler_ = std::make_unique<Scheduler>(options_, *kv_, prefix_cache_.get(), proposer_.get());
  if (draft != nullptr && proposer_ != nullptr && model_.matmul_parameters() > 0) {
    scheduler_->set_draft_work_ratio(static_cast<double>(draft->model.matmul_parameters()) /
                                     static_cast<double>(model_.matmul_parameters()));
  }
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
  // Tensor/pipeline followers run every plan's KV ops, offloads and restores included, on a
  // tier of their own that mirrors this one (mirror_tier_options), told with the first plan.
  // Every rank starts it empty: files a previous job left could differ between ranks.
  const bool distributed =
      model_.tensor_parallel() != nullptr || model_.pipeline_parallel() != nullptr;
  std::unique_ptr<OffloadTier> offload;
  if (tier.enabled()) {
    if (distributed) {
      tier.reuse_files = false;
      runner_->announce_tier(tier);
    }
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

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<std::vector<int32_t>> Engine::recent_prompts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {recent_prompts_.begin(), recent_prompts_.end()};
}

}  // namespace rapide
