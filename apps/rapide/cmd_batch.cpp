// `rapide batch`: run an OpenAI Batch API JSONL file offline, for throughput, resumably
// (see src/batch/batch_runner.h and docs/batch.md).
#include <cstdio>
#include <filesystem>

#include "apps/rapide/commands.h"
#include "apps/rapide/engine_flags.h"
#include "apps/rapide/model_options.h"
#include "base/logging.h"
#include "batch/batch_runner.h"
#include "engine/engine.h"

namespace rapide::cli {

namespace {

struct BatchCommandOptions {
  ModelOptions model;
  EngineFlags engine;
  batch::BatchOptions batch;
  std::string order = "prefix";
  std::string progress = "auto";
  std::string served_model_name;
};

// Nobody waits on a batch, so the engine is sized for throughput, not latency: many
// sequences decode together (one pass over the weights serves them all) and large steps
// amortize each forward pass; the server keeps 64 / 512 to bound TPOT. --kv-memory auto
// provides for the 256 sequences at full context, up to 2 GiB (the server's cap is 1 GiB).
void set_throughput_defaults(EngineOptions& o) {
  o.max_seqs = 256;
  o.max_batch_tokens = 4096;
  o.prefill_chunk = 1024;
  o.max_queue = 1 << 16;
  o.kv_auto_cap = uint64_t{2} << 30;
}

std::string model_id_for(const BatchCommandOptions& o) {
  if (!o.served_model_name.empty()) return o.served_model_name;
  std::filesystem::path path(o.model.model_path);
  if (path.filename().empty()) path = path.parent_path();  // "folder/" of an HF model
  return path.stem().string();
}

void batch_main(BatchCommandOptions& o) {
  o.batch.order = batch::parse_batch_order(o.order);
  o.batch.progress = batch::parse_progress_mode(o.progress);
  o.batch.model_id = model_id_for(o);
  LoadedModel loaded = load_for_inference(o.model);
  const EngineOptions engine_options = o.engine.resolve(static_cast<int>(loaded.pool->size()));
  loaded.pool.reset();  // the engine builds its own pool
  const auto draft = load_draft_model(o.engine.draft_model);
  Engine engine(*loaded.model, *loaded.tokenizer, engine_options,
                draft ? draft->ref.get() : nullptr);
  spdlog::info(
      "engine: max-seqs {}, max-batch-tokens {}, prefill-chunk {}, kv-memory {}, prefix cache "
      "{}, {} batching",
      engine_options.max_seqs, engine_options.max_batch_tokens, engine_options.prefill_chunk,
      engine_options.kv_memory, engine_options.prefix_cache ? "on" : "off",
      batching_mode_name(engine_options.batching));
  const batch::BatchSummary s = batch::run_batch(engine, o.batch);
  const double seconds = s.seconds > 0 ? s.seconds : 1e-9;
  std::fprintf(
      stderr,
      "batch done: %llu lines (%llu resumed, %llu ok, %llu errors) in %.2f s | "
      "generated %llu tokens, %.1f tok/s | prompt %llu tokens (%llu cached), "
      "%.1f tok/s | %.2f requests/s\n",
      static_cast<unsigned long long>(s.total_lines), static_cast<unsigned long long>(s.resumed),
      static_cast<unsigned long long>(s.succeeded), static_cast<unsigned long long>(s.failed),
      s.seconds, static_cast<unsigned long long>(s.generated_tokens), s.generated_tokens / seconds,
      static_cast<unsigned long long>(s.prompt_tokens),
      static_cast<unsigned long long>(s.cached_tokens), s.prompt_tokens / seconds,
      (s.succeeded + s.failed) / seconds);
}

}  // namespace

void register_batch(CLI::App& app) {
  auto o = std::make_shared<BatchCommandOptions>();
  set_throughput_defaults(o->engine.options);
  CLI::App* cmd = app.add_subcommand(
      "batch", "run an OpenAI Batch API JSONL file offline (resumable, throughput-first)");
  add_model_options(*cmd, o->model);
  batch::BatchOptions& b = o->batch;
  cmd->add_option("-i,--input", b.input, "requests, one Batch API line each")->required();
  cmd->add_option("-o,--output", b.output, "results (appended; re-run to resume)")->required();
  cmd->add_option("--errors", b.errors, "lines that could not run (default: OUTPUT.errors.jsonl)");
  cmd->add_option("--order", o->order, "prefix (group shared prompt prefixes) | input")
      ->capture_default_str();
  cmd->add_option("--window", b.window, "requests read and ordered at once")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--in-flight", b.in_flight,
                  "engine requests kept submitted (0 = 4 x --max-seqs; 1 = one at a time)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--progress", o->progress, "auto (bar on a terminal) | bar | lines | off")
      ->capture_default_str();
  cmd->add_option("--progress-interval", b.progress_interval_s, "seconds between plain lines")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--sync-every", b.sync.every_records, "fdatasync after this many records")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--served-model-name", o->served_model_name,
                  "model id bodies may name (default: the model file's name)");
  add_engine_flags(*cmd, o->engine);
  add_jinja_flag(*cmd);
  cmd->callback([o] { batch_main(*o); });
}

}  // namespace rapide::cli
