#include "apps/rapide/model_options.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "base/clock.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/logging.h"
#include "kv/memory_budget.h"
#include "lora/lora_load.h"

namespace rapide::cli {

void add_model_options(CLI::App& command, ModelOptions& options) {
  command
      .add_option("-m,--model", options.model_path,
                  "model: a GGUF file, a llama2.c checkpoint, or a Hugging Face folder")
      ->required();
  command.add_option("--tokenizer", options.tokenizer_path,
                     "tokenizer.bin for llama2.c checkpoints (default: next to the checkpoint)");
  command.add_option("-t,--threads", options.threads, "worker threads (default: physical cores)")
      ->check(CLI::Range(0, 1024));
  command
      .add_option("--act-quant", options.act_quant,
                  "activations of quantized matrix products: int8 (integer dot products, as "
                  "llama.cpp) or off (f32 activations against dequantized weights); bf16 also "
                  "runs F16 weights as BF16 (about 2x prefill with AVX512-BF16, bf16 rounding)")
      ->check(CLI::IsMember({"int8", "off", "bf16"}));
  command
      .add_option(
          "--tp", options.tp,
          "tensor parallelism over N MPI ranks: launch as mpirun -np N rapide-mpi ... --tp N "
          "(with --pp P: mpirun -np N*P, each stage split over N ranks)")
      ->check(CLI::Range(1, 4096));
  command
      .add_option("--pp", options.pp,
                  "pipeline parallelism over N MPI ranks (layers split in N stages): launch as "
                  "mpirun -np N rapide-mpi ... --pp N")
      ->check(CLI::Range(1, 4096));
  command
      .add_option("--pp-micro-batches", options.pp_micro_batches,
                  "micro-batches a pipelined forward pass is cut into (default: one per stage)")
      ->check(CLI::Range(0, 4096));
  command.add_option("--memory-limit", options.memory_limit,
                     "most weight memory one process (one rank under --tp / --pp) may hold, e.g. "
                     "512MiB or 0.5 of free RAM; a larger model is refused: split it with --pp N "
                     "or --tp N over more ranks");
  command.add_flag("--mlock", options.mlock,
                   "lock the loaded model in RAM (mlockall) so it is never swapped out; fails, "
                   "naming RLIMIT_MEMLOCK, when the limit is too low (ulimit -l)");
}

void add_lora_options(CLI::App& command, ModelOptions& options) {
  command.add_option("--lora", options.loras,
                     "LoRA adapter NAME=PATH[:SCALE] (repeatable): a llama.cpp LoRA GGUF or a "
                     "PEFT folder (adapter_config.json + adapter_model.safetensors); SCALE "
                     "multiplies alpha/r (default 1)");
  command.add_option("--lora-use", options.lora_use,
                     "the --lora adapter to run with (default: the only one given)");
}

namespace {

// --lora: each adapter read for the loaded file and added to the model, in flag order.
void add_loras(const ModelOptions& options, const ModelFile& file, Model& model) {
  for (const std::string& text : options.loras) {
    const TimePoint start = Clock::now();
    const LoraSpec spec = parse_lora_spec(text);
    const int index = model.add_lora(load_lora(spec, file));
    const LoraAdapter& a = model.lora(index);
    spdlog::info("adapter '{}': {} ({}), {} projections, {:.2f} MiB, scale {} in {:.0f} ms",
                 a.name(), a.path(), a.format(), a.count(), a.bytes() / 1048576.0, a.user_scale(),
                 seconds_between(start, Clock::now()) * 1e3);
  }
}

// --memory-limit's size, in the forms --kv-memory takes (kv/memory_budget.h), whose message
// speaks of the KV budget: say which option it was. Empty: no limit.
uint64_t parse_memory_limit(const std::string& text) {
  if (text.empty()) return UINT64_MAX;
  try {
    return parse_memory_budget(text);
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "--memory-limit takes the sizes --kv-memory takes: {}",
         e.what());
  }
}

// VmLck of /proc/self/status: what this process has locked (0 when unreadable).
uint64_t locked_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmLck:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

// --memory-limit: each rank checks its own share, so a model too large for one process
// serves once its layers are split over enough ranks (issue 21). Checked after the shard is
// prepared, since only the model knows its repacked size; the mapped file itself costs page
// cache, not the process's memory.
void check_weights_fit(const Model& model, uint64_t limit, int rank) {
  if (model.weight_bytes() <= limit) return;
  const int first = model.first_layer();
  fail(ErrorCode::kInvalidArgument,
       "rank {}'s weights (layers {}..{}) take {}, over --memory-limit {}: split the model over "
       "more processes with mpirun -np N rapide-mpi ... --pp N (or --tp N)",
       rank, first, first + model.config().n_layers - 1, format_bytes(model.weight_bytes()),
       format_bytes(limit));
}

}  // namespace

LoadedModel load_for_inference(const ModelOptions& options) {
  const TimePoint start = Clock::now();
  // Parsed first: a malformed size is refused before the model is read.
  const uint64_t memory_limit = parse_memory_limit(options.memory_limit);
  LoadOptions load_options;
  load_options.tokenizer_path = options.tokenizer_path;
  LoadedModel loaded;
  loaded.file = std::make_shared<const ModelFile>(load_model(options.model_path, load_options));
  if (options.tp > 1 || options.pp > 1) {
    loaded.parallel = join_parallel_job(options.tp, options.pp, options.pp_micro_batches);
  }
  ParallelJob* job = loaded.parallel.get();
  loaded.model = std::make_unique<Model>(loaded.file, act_quant_from_name(options.act_quant),
                                         job ? job->tensor_parallel() : nullptr,
                                         job ? job->pipeline_parallel() : nullptr);
  check_weights_fit(*loaded.model, memory_limit, job ? job->rank() : 0);
  add_loras(options, *loaded.file, *loaded.model);  // every rank: --tp / --pp refuse alike
  loaded.tokenizer = Tokenizer::create(loaded.file->tokenizer);
  if (options.mlock) lock_model_in_ram();
  const int threads = options.threads > 0 ? options.threads : physical_core_count();
  loaded.pool = std::make_unique<ThreadPool>(threads);
  if (job != nullptr && !job->leader()) {
    spdlog::info("rank {} of {}: {:.1f} MiB of weights (layers {}..{}), serving rank 0's passes",
                 job->rank(), job->size(), loaded.model->weight_bytes() / 1048576.0,
                 loaded.model->first_layer(),
                 loaded.model->first_layer() + loaded.model->config().n_layers - 1);
    job->serve_followers(*loaded.model, *loaded.pool);
    // The command is the leader's alone; MPI is finalised by the exit handlers.
    std::exit(0);
  }
  const ModelConfig& c = loaded.model->config();
  spdlog::info("loaded {} ({}, {} layers, dim {}, vocab {}, {:.1f} MiB of weights) in {:.0f} ms",
               options.model_path, loaded.file->format, c.n_layers, c.dim, c.vocab_size,
               loaded.model->weight_bytes() / 1048576.0,
               seconds_between(start, Clock::now()) * 1e3);
  spdlog::info("{} threads, kernels: {}", threads, isa_level_name(active_isa_level()));
  return loaded;
}

// --mlock: every page the process holds once the model is loaded (the mapped file and the
// repacked weights alike) is locked and faulted in; the KV cache allocated later is not.
// llama.cpp locks its mapped weights the same way. Without CAP_IPC_LOCK the lock is bounded by
// RLIMIT_MEMLOCK, the usual reason it fails.
void lock_model_in_ram() {
  if (::mlockall(MCL_CURRENT) != 0) {
    const int error = errno;
    rlimit limit{};
    ::getrlimit(RLIMIT_MEMLOCK, &limit);
    const std::string allowed = limit.rlim_cur == RLIM_INFINITY
                                    ? std::string("unlimited")
                                    : format_bytes(static_cast<uint64_t>(limit.rlim_cur));
    fail(ErrorCode::kResourceExhausted,
         "--mlock: could not lock the model in RAM ({}): RLIMIT_MEMLOCK allows {}; raise it "
         "(ulimit -l unlimited, LimitMEMLOCK=infinity in a systemd unit, --ulimit memlock=-1 "
         "for docker) or run without --mlock",
         std::strerror(error), allowed);
  }
  spdlog::info("--mlock: {} locked in RAM", format_bytes(locked_bytes()));
}

int32_t chosen_lora(const ModelOptions& options, const Model& model) {
  if (!options.lora_use.empty()) {
    const int index = model.find_lora(options.lora_use);
    if (index < 0) {
      fail(ErrorCode::kInvalidArgument, "--lora-use {}: no --lora adapter has that name",
           options.lora_use);
    }
    return index;
  }
  if (model.lora_count() > 1) {
    fail(ErrorCode::kInvalidArgument,
         "{} --lora adapters given: choose the one to run with --lora-use NAME",
         model.lora_count());
  }
  return model.lora_count() == 1 ? 0 : -1;
}

bool is_follower_rank(const ModelOptions& options) {
  return (options.tp > 1 || options.pp > 1) && parallel_job_rank() != 0;
}

std::unique_ptr<LoadedDraft> load_draft_model(const std::string& path) {
  if (path.empty()) return nullptr;
  ModelOptions options;
  options.model_path = path;
  options.threads = 1;  // the draft runs on the engine's pool
  auto draft = std::make_unique<LoadedDraft>();
  draft->loaded = load_for_inference(options);
  draft->loaded.pool.reset();
  draft->ref =
      std::make_unique<DraftModel>(DraftModel{*draft->loaded.model, *draft->loaded.tokenizer});
  return draft;
}

}  // namespace rapide::cli
