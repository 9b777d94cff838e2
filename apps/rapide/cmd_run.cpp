// `rapide run`: generate from one prompt, streaming text, then one line of figures.
#include <cstdio>

#include "apps/rapide/commands.h"
#include "apps/rapide/engine_flags.h"
#include "apps/rapide/model_options.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "engine/engine.h"

namespace rapide::cli {

namespace {

struct RunOptions {
  ModelOptions model;
  EngineFlags engine;
  SamplingFlags sampling;
  std::string prompt;
  std::string prompt_file;
  bool no_bos = false;
  bool special = false;
  bool print_prompt = true;
};

void print_figures(const TokenEvent& last) {
  const double ttft = last.metrics.ttft_seconds;
  const double prefill = last.metrics.prefill_seconds;
  const int n = last.completion_tokens;
  const double tpot = last.metrics.tpot_seconds;
  std::fprintf(stderr,
               "\nprompt tokens: %d | TTFT: %.2f ms | prefill: %.1f tok/s | TPOT: %.2f ms | "
               "decode: %.1f tok/s | generated: %d (%s)\n",
               last.prompt_tokens, ttft * 1e3, prefill > 0 ? last.prompt_tokens / prefill : 0.0,
               tpot * 1e3, tpot > 0 ? 1.0 / tpot : 0.0, n, finish_reason_name(last.finish_reason));
}

void run(const RunOptions& options) {
  if (options.prompt.empty() == options.prompt_file.empty()) {
    fail(ErrorCode::kInvalidArgument, "give exactly one of -p/--prompt and -f/--file");
  }
  const std::string prompt =
      options.prompt_file.empty() ? options.prompt : read_text_file(options.prompt_file);
  LoadedModel loaded = load_for_inference(options.model);
  const int32_t adapter = chosen_lora(options.model, *loaded.model);
  const Tokenizer& tokenizer = *loaded.tokenizer;
  std::vector<int32_t> tokens = tokenizer.encode(prompt, !options.no_bos, options.special);

  const EngineOptions engine_options = options.engine.resolve_for_one_sequence(loaded.pool->size());
  loaded.pool.reset();  // the engine builds its own pool
  const auto draft = load_draft_model(options.engine.draft_model);
  Engine engine(*loaded.model, tokenizer, engine_options, draft ? draft->ref.get() : nullptr);

  auto queue = std::make_shared<EventQueue>();
  Request request;
  request.prompt = tokens;
  request.sampling = options.sampling.resolve();
  request.sink = queue;
  request.adapter = adapter;
  engine.submit(std::move(request));  // validates: errors come before any output
  if (options.print_prompt) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  TokenEvent event;
  while (queue->pop(event)) {
    std::fputs(event.text.c_str(), stdout);
    std::fflush(stdout);
    if (event.finished) break;
  }
  if (event.finish_reason == FinishReason::kError) fail(ErrorCode::kInternal, "{}", event.error);
  print_figures(event);
  if (const ParallelJob* job = loaded.parallel.get()) {
    std::fprintf(stderr,
                 "%s: %d ranks, %.1f MiB of weights on rank 0, %llu passes (%.1f KiB of plans), "
                 "%.3f s in MPI calls, idle %.1f %% of pass time on rank 0\n",
                 loaded.model->pipeline_parallel() == nullptr ? "tensor parallel"
                 : loaded.model->tensor_parallel() == nullptr ? "pipeline"
                                                              : "tensor x pipeline",
                 job->size(), loaded.model->weight_bytes() / 1048576.0,
                 static_cast<unsigned long long>(job->passes()), job->plan_bytes() / 1024.0,
                 job->communication_seconds(), 100.0 * job->idle_fraction());
  }
  const EngineStats stats = engine.stats();
  if (stats.spec_enabled) {
    const SpecStats& sp = stats.spec;
    std::fprintf(stderr,
                 "speculation: %llu guesses verified, %llu accepted (%.1f %%), %.2f accepted per "
                 "verification, %llu steps for %d tokens, last k %d, auto off %llu times, "
                 "auto predicted %.2fx\n",
                 static_cast<unsigned long long>(sp.proposed),
                 static_cast<unsigned long long>(sp.accepted), 100.0 * sp.acceptance_rate(),
                 sp.mean_accepted(), static_cast<unsigned long long>(stats.steps),
                 event.completion_tokens, sp.last_k,
                 static_cast<unsigned long long>(sp.off_decisions), sp.last_predicted_speedup);
  }
}

}  // namespace

void register_run(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt and report TTFT / TPOT");
  add_model_options(*cmd, options->model);
  add_lora_options(*cmd, options->model);
  cmd->add_option("-p,--prompt", options->prompt, "prompt text");
  cmd->add_option("-f,--file", options->prompt_file, "read the prompt from a file");
  cmd->add_flag("--no-bos", options->no_bos, "do not prepend the BOS token");
  cmd->add_flag("--special", options->special,
                "parse special tokens (e.g. <|im_start|>) in the prompt");
  cmd->add_flag("!--no-print-prompt", options->print_prompt, "print only the generated text");
  add_sampling_flags(*cmd, options->sampling);
  add_engine_flags(*cmd, options->engine);
  cmd->callback([options] { run(*options); });
}

}  // namespace rapide::cli
