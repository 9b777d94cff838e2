// `rapide perplexity`: llama.cpp's method, so figures compare across engines: the text
// (BOS first) is cut into non-overlapping windows of --ctx tokens, each window starts with
// BOS, and only the second half of each window is scored (every scored token has at least
// ctx/2 tokens of context).
#include <cmath>
#include <cstdio>

#include "apps/rapide/commands.h"
#include "apps/rapide/model_options.h"
#include "apps/rapide/perplexity_command.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "kernels/kv_rows.h"
#include "model/contiguous_kv_store.h"

namespace rapide::cli {

namespace {

// log P(token | logits) with a numerically stable log-sum-exp (sum in double as llama.cpp).
double log_probability(const float* logits, int vocab, int token) {
  float max_logit = logits[0];
  for (int i = 1; i < vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max_logit);
  return logits[token] - max_logit - std::log(sum);
}

}  // namespace

PerplexityFigure measure_perplexity(const PerplexityOptions& options) {
  LoadedModel loaded = load_for_inference(options.model);
  const std::string text = read_text_file(options.text_path);
  const std::vector<int32_t> tokens = loaded.tokenizer->encode(text, /*add_bos=*/true);
  const int ctx = options.context;
  if (ctx < 4) fail(ErrorCode::kInvalidArgument, "--ctx must be at least 4 (got {})", ctx);
  if (ctx > loaded.model->config().max_context) {
    fail(ErrorCode::kInvalidArgument, "--ctx {} exceeds the model's trained context {}", ctx,
         loaded.model->config().max_context);
  }
  const int32_t adapter = chosen_lora(options.model, *loaded.model);
  const int windows = static_cast<int>(tokens.size()) / ctx;
  if (windows == 0) {
    fail(ErrorCode::kInvalidArgument, "the text has {} tokens, fewer than one --ctx window of {}",
         tokens.size(), ctx);
  }
  if (options.progress) {
    std::fprintf(stderr, "perplexity: %zu tokens, %d windows of %d, scoring the last %d of each\n",
                 tokens.size(), windows, ctx, ctx - ctx / 2 - 1);
  }

  ContiguousKvStore kv(loaded.model->config(), 1, ctx, parse_kv_type(options.kv_type));
  const int vocab = loaded.model->config().vocab_size;
  const int first_scored = ctx / 2;
  double nll = 0.0, nll_squared = 0.0;
  int64_t count = 0;
  const TimePoint start = Clock::now();
  Batch batch;
  std::vector<float> window_logits(static_cast<size_t>(ctx) * vocab);
  for (int w = 0; w < windows; ++w) {
    const size_t base = static_cast<size_t>(w) * ctx;
    // Feed the window in --batch sized pieces; keep logits of every position.
    for (int begin = 0; begin < ctx; begin += options.batch) {
      const int end = std::min(ctx, begin + options.batch);
      batch.clear();
      for (int p = begin; p < end; ++p) {
        int32_t token = tokens[base + p];
        if (p == 0 && loaded.tokenizer->bos_id() >= 0) token = loaded.tokenizer->bos_id();
        batch.add(token, 0, p, true, adapter);
      }
      auto logits = loaded.model->forward(batch, kv, *loaded.pool);
      std::copy(logits.begin(), logits.end(),
                window_logits.begin() + static_cast<size_t>(begin) * vocab);
    }
    for (int p = first_scored; p < ctx - 1; ++p) {
      const double lp = log_probability(window_logits.data() + static_cast<size_t>(p) * vocab,
                                        vocab, tokens[base + p + 1]);
      nll -= lp;
      nll_squared += lp * lp;
      ++count;
    }
    const double ppl = std::exp(nll / count);
    if (options.progress) std::fprintf(stderr, "[%d/%d] %.4f\n", w + 1, windows, ppl);
  }
  const double mean = nll / count;
  const double variance = nll_squared / count - mean * mean;
  const double ppl = std::exp(mean);
  const double error = count > 1 ? ppl * std::sqrt(std::max(0.0, variance) / (count - 1)) : 0.0;
  const double seconds = seconds_between(start, Clock::now());
  return PerplexityFigure{ppl, error, count, windows * ctx / seconds};
}

namespace {

void run_perplexity(const PerplexityOptions& options) {
  const PerplexityFigure f = measure_perplexity(options);
  std::printf("PPL = %.4f +/- %.5f\n", f.perplexity, f.error);
  std::fprintf(stderr, "%lld tokens scored, %.1f tok/s evaluated\n",
               static_cast<long long>(f.scored_tokens), f.tokens_per_second);
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto options = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a text, llama.cpp's method");
  add_model_options(*cmd, options->model);
  add_lora_options(*cmd, options->model);
  cmd->add_option("-f,--file", options->text_path, "text file to score")->required();
  cmd->add_option("-c,--ctx-size,--ctx", options->context, "window length in tokens")
      ->capture_default_str();
  cmd->add_option("-b,--batch", options->batch, "tokens per forward pass")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--kv-type", options->kv_type, "KV cache type: f16 | f32 | q8_0 | q4_0")
      ->capture_default_str();
  cmd->callback([options] { run_perplexity(*options); });
}

}  // namespace rapide::cli
