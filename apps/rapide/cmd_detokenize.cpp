// `rapide detokenize -m MODEL IDS...`: the text of token ids, the inverse of `rapide
// tokenize`. Ids may be given as separate arguments or as one list ("1 2 3", "1,2,3",
// "[1, 2, 3]"), so the output of either engine can be pasted as is. The text is written as
// raw bytes, without a newline added.
#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/rapide/commands.h"
#include "apps/rapide/tokenizer_loading.h"
#include "base/error.h"

namespace rapide::cli {
namespace {

struct DetokenizeOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::vector<std::string> ids;
  bool special = false;
};

std::vector<int32_t> parse_ids(const std::vector<std::string>& args) {
  std::vector<int32_t> ids;
  for (const std::string& arg : args) {
    const char* p = arg.data();
    const char* end = p + arg.size();
    while (p < end) {
      if (*p == ' ' || *p == ',' || *p == '[' || *p == ']' || *p == '\t' || *p == '\n') {
        ++p;
        continue;
      }
      int32_t id = 0;
      const auto [next, error] = std::from_chars(p, end, id);
      if (error != std::errc() || next == p) {
        fail(ErrorCode::kInvalidArgument, "'{}' is not a list of token ids", arg);
      }
      ids.push_back(id);
      p = next;
    }
  }
  return ids;
}

void detokenize(const DetokenizeOptions& options) {
  const std::vector<int32_t> ids = parse_ids(options.ids);
  const auto tokenizer = load_tokenizer(options.model_path, options.tokenizer_path);
  const std::string text = tokenizer->decode(ids, /*skip_leading_space=*/true, options.special);
  std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace

void register_detokenize(CLI::App& app) {
  auto options = std::make_shared<DetokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("detokenize", "print the text of token ids");
  add_tokenizer_source_options(cmd, &options->model_path, &options->tokenizer_path);
  cmd->add_option("ids", options->ids, "token ids (\"1 2 3\", \"1,2,3\" or \"[1, 2, 3]\")")
      ->required();
  cmd->add_flag("--special", options->special,
                "print the text of special tokens (e.g. <|im_end|>) instead of nothing");
  cmd->callback([options] { detokenize(*options); });
}

}  // namespace rapide::cli
