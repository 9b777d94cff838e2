// `rapide compress -m MODEL --ratio R --question Q [--context FILE...]`: prompt compression
// (src/compress) on the command line. Each --context file is one marked context (passages
// separated by blank lines) and the question follows them:
//   <context>FILE1</context>\n\n<context>FILE2</context>\n\nQUESTION
// Without --context the marked prompt is read from standard input (context_markup.h).
// The compressed prompt goes to standard output, the figures to standard error.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "apps/rapide/commands.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "compress/context_markup.h"
#include "compress/prompt_compressor.h"
#include "formats/model_file.h"

namespace rapide::cli {

namespace {

struct CompressOptions {
  std::string model_path;
  std::string compressor_path;
  std::string tokenizer_path;
  double ratio = 0.5;
  std::string question;
  std::vector<std::string> context_files;
  int threads = 1;
};

std::string marked_prompt(const CompressOptions& options) {
  if (options.context_files.empty()) {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::string prompt;
  for (const std::string& path : options.context_files) {
    prompt += fmt::format("{}{}{}\n\n", compress::kContextOpen, read_text_file(path),
                          compress::kContextClose);
  }
  return prompt + options.question;
}

void run_compress(const CompressOptions& options) {
  if (!(options.ratio > 0.0 && options.ratio <= 1.0)) {
    fail(ErrorCode::kInvalidArgument, "--ratio must be in (0, 1], got {}", options.ratio);
  }
  LoadOptions load;
  load.tokenizer_path = options.tokenizer_path;
  auto served = std::make_shared<const ModelFile>(load_model(options.model_path, load));
  auto scoring = options.compressor_path.empty()
                     ? served
                     : std::make_shared<const ModelFile>(load_model(options.compressor_path));
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::create(served->tokenizer);
  compress::TokenScorer scorer(scoring, options.threads);
  compress::PromptCompressor compressor(scorer);

  std::vector<std::string> texts{marked_prompt(options)};
  const std::string original = compress::assemble(compress::parse_marked_prompt(texts[0]));
  compress::CompressionRequest request;
  request.ratio = options.ratio;
  request.question = options.question;
  const compress::CompressionReport r = compressor.compress(texts, request, 0.0);
  std::fwrite(texts[0].data(), 1, texts[0].size(), stdout);
  if (!texts[0].empty() && texts[0].back() != '\n') std::fputc('\n', stdout);
  const size_t before = tokenizer->encode(original, true).size();
  const size_t after = tokenizer->encode(texts[0], true).size();
  std::fprintf(stderr,
               "compress: %s; passages %d -> %d, context %d -> %d scorer tokens; prompt %zu -> "
               "%zu tokens (%.2f); %.1f ms\n",
               r.applied ? "applied" : ("not applied: " + r.reason).c_str(), r.passages,
               r.kept_passages, r.context_tokens, r.kept_context_tokens, before, after,
               before ? static_cast<double>(after) / before : 1.0, r.seconds * 1e3);
}

}  // namespace

void register_compress(CLI::App& app) {
  auto options = std::make_shared<CompressOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compress", "drop the context passages and words a question does not need (LLMLingua style)");
  cmd->add_option("-m,--model", options->model_path,
                  "the model the prompt is for (its tokens are counted; it scores unless "
                  "--compressor-model is given)")
      ->required();
  cmd->add_option("--tokenizer", options->tokenizer_path,
                  "tokenizer.bin for a llama2.c checkpoint given as -m");
  cmd->add_option("--compressor-model", options->compressor_path,
                  "a smaller model that scores the context instead of -m (any vocabulary)");
  cmd->add_option("--ratio", options->ratio, "context tokens to keep, in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--question", options->question,
                  "the question passages are ranked by (and, with --context, the prompt's end)");
  cmd->add_option("--context", options->context_files,
                  "a context file (passages separated by blank lines); repeatable. Without it "
                  "a marked prompt is read from standard input");
  cmd->add_option("-t,--threads", options->threads, "scoring threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->callback([options] { run_compress(*options); });
}

}  // namespace rapide::cli
