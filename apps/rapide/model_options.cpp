#include "apps/rapide/model_options.h"

#include <cstdlib>

#include "base/clock.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/logging.h"

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
                  "llama.cpp) or off (f32 activations against dequantized weights)")
      ->check(CLI::IsMember({"int8", "off"}));
  command
      .add_option("--tp", options.tp,
                  "tensor parallelism over N MPI ranks: launch as mpirun -np N rapide ... --tp N")
      ->check(CLI::Range(1, 4096));
  command
      .add_option("--pp", options.pp,
                  "pipeline parallelism over N MPI ranks (layers split in N stages): launch as "
                  "mpirun -np N rapide ... --pp N")
      ->check(CLI::Range(1, 4096));
  command
      .add_option("--pp-micro-batches", options.pp_micro_batches,
                  "micro-batches a pipelined forward pass is cut into (default: one per stage)")
      ->check(CLI::Range(0, 4096));
}

LoadedModel load_for_inference(const ModelOptions& options) {
  const TimePoint start = Clock::now();
  LoadOptions load_options;
  load_options.tokenizer_path = options.tokenizer_path;
  LoadedModel loaded;
  loaded.file = std::make_shared<const ModelFile>(load_model(options.model_path, load_options));
  if (options.tp > 1 || options.pp > 1) {
    loaded.parallel = join_parallel_job(options.tp, options.pp, options.pp_micro_batches);
  }
  ParallelJob* job = loaded.parallel.get();
  loaded.model = std::make_unique<Model>(
      loaded.file, options.act_quant == "off" ? ActQuant::kOff : ActQuant::kInt8,
      job ? job->tensor_parallel() : nullptr, job ? job->pipeline_parallel() : nullptr);
  loaded.tokenizer = Tokenizer::create(loaded.file->tokenizer);
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
