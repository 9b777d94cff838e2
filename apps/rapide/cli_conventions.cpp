#include "apps/rapide/cli_conventions.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace rapide::cli {

namespace {

// llama.cpp flags with more than one letter after a single dash, and their rapide names.
struct DashAlias {
  const char* from;
  const char* to;  // nullptr: accepted and ignored (with its value)
  const char* note;
};
constexpr DashAlias kDashAliases[] = {
    {"-np", "--max-seqs", nullptr},
    {"-fa", "--flash-attn", nullptr},
    {"-ngl", nullptr,
     "-ngl (GPU layers) has no meaning for rapide, which runs on the CPU: ignored"},
    {"--n-gpu-layers", nullptr,
     "--n-gpu-layers has no meaning for rapide, which runs on the CPU: ignored"},
};

// llama.cpp flags that fetch a model from the network. rapide makes no downloads, so they
// are refused by name: read as CLI11 would, -hf is "-h -f" and printed the help (exit 0).
constexpr const char* kDownloadFlags[] = {"-hf",        "-hfr", "--hf-repo",       "-hff",
                                          "--hf-file",  "-hfd", "--hf-repo-draft", "-mu",
                                          "--model-url"};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string env_name_for(const std::string& long_name) {
  std::string env = "RAPIDE_";
  for (const char c : long_name) {
    env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return env;
}

void add_env_names(CLI::App& command) {
  for (CLI::Option* option : command.get_options()) {
    const std::vector<std::string>& names = option->get_lnames();
    if (names.empty() || names[0] == "help" || names[0] == "version" || names[0] == "config") {
      continue;
    }
    if (option->get_envname().empty()) option->envname(env_name_for(names[0]));
  }
}

// The subcommand being parsed when the error happened: the deepest one selected.
const CLI::App* deepest_selected(const CLI::App& app) {
  const CLI::App* at = &app;
  for (;;) {
    const std::vector<CLI::App*> chosen = at->get_subcommands();
    if (chosen.empty()) return at;
    at = chosen.front();
  }
}

std::string command_path(const CLI::App* command) {
  std::string path;
  for (const CLI::App* at = command; at != nullptr; at = at->get_parent()) {
    path = at->get_parent() == nullptr ? "rapide" + path : " " + at->get_name() + path;
  }
  return path;
}

std::vector<std::string> flag_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& n : option->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : option->get_snames()) names.push_back("-" + n);
  }
  return names;
}

std::vector<std::string> subcommand_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* sub : command.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// "unknown flag --ctx-siz; did you mean --ctx-size?" from CLI11's list of unexpected
// arguments, else "".
std::string explain_extras(const CLI::App& app, const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return "";
  std::vector<std::string> words;
  for (size_t at = colon + 2; at < message.size();) {
    const size_t space = std::min(message.find(' ', at), message.size());
    words.push_back(message.substr(at, space - at));
    at = space + 1;
  }
  const CLI::App* command = deepest_selected(app);
  const std::string where = command_path(command);
  for (const std::string& word : words) {  // a mistyped flag is the likely culprit
    if (word.size() < 2 || word[0] != '-') continue;
    const std::string flag = word.substr(0, word.find('='));
    const std::string guess = closest_name(flag, flag_names(*command));
    return fmt::format("unknown flag {} for '{}'{}; see '{} --help'", flag, where,
                       guess.empty() ? "" : "; did you mean " + guess + "?", where);
  }
  const std::string& word = words.empty() ? message : words.back();
  const std::string guess = closest_name(word, subcommand_names(*command));
  return fmt::format("unexpected argument '{}' for '{}'{}; see '{} --help'", word, where,
                     guess.empty() ? "" : "; did you mean " + guess + "?", where);
}

// TOML as CLI11 reads it, where a key outside any [section] belongs to the subcommand being
// run: `rapide serve --config f` with `port = 8080` sets serve's --port. Keys under
// [serve] apply to serve only, so one file can configure several subcommands.
class SubcommandConfig final : public CLI::ConfigTOML {
 public:
  explicit SubcommandConfig(const CLI::App& app) : app_(app) {}
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> items = CLI::ConfigTOML::from_config(input);
    const std::vector<CLI::App*> chosen = app_.get_subcommands();
    if (chosen.empty()) return items;
    for (CLI::ConfigItem& item : items) {
      if (item.parents.empty()) item.parents = {chosen.front()->get_name()};
    }
    return items;
  }

 private:
  const CLI::App& app_;
};

// With no subcommand chosen, the subcommands to choose from: "unknown subcommand 'srve'; did
// you mean serve? The subcommands: inspect, synth, ...". CLI11 says only "A subcommand is
// required" (the word it could not place is left in remaining()). "" when one was chosen.
std::string explain_missing_subcommand(const CLI::App& app) {
  if (!app.get_subcommands().empty()) return "";
  const std::vector<std::string> names = subcommand_names(app);
  const std::string list = fmt::format("{}", fmt::join(names, ", "));
  for (const std::string& word : app.remaining()) {
    if (word.empty() || word[0] == '-') continue;
    const std::string guess = closest_name(word, names);
    return fmt::format("unknown subcommand '{}'{}; the subcommands are {} (see 'rapide --help')",
                       word, guess.empty() ? "" : "; did you mean " + guess + "?", list);
  }
  return fmt::format("a subcommand is required: one of {} (see 'rapide --help')", list);
}

std::string one_line_failure(const CLI::App* app, const CLI::Error& e) {
  std::string line;
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
      dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    line = explain_missing_subcommand(*app);
  }
  if (line.empty() && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    line = explain_extras(*app, e.what());
  }
  if (line.empty()) {
    const std::string where = command_path(deepest_selected(*app));
    line = fmt::format("{} (see '{} --help')", e.what(), where);
  }
  return "error: " + line + "\n";
}

// A configurable option's key in a --config file, and whether it has a value to write.
bool has_config_value(const CLI::Option& option) {
  return option.count() > 0 || !option.get_default_str().empty() || option.get_expected_min() == 0;
}

}  // namespace

std::string effective_config(const CLI::App& command) {
  std::string out = fmt::format(
      "# {}: the flags in effect (command line over environment over --config file);\n"
      "# `{} --config FILE` reads this back.\n",
      command_path(&command), command_path(&command));
  // CLI11 writes `key=""` for an option with neither a value nor a default, which an integer
  // option would not read back: those become `# key = (not set)` lines, so the file still
  // names every key.
  std::vector<std::string> unset;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_configurable() && !has_config_value(*option)) {
      unset.push_back(option->get_single_name());
    }
  }
  std::istringstream lines(command.config_to_str(true, false));
  for (std::string line; std::getline(lines, line);) {
    const std::string key = line.substr(0, line.find('='));
    if (std::find(unset.begin(), unset.end(), key) == unset.end()) out += line + "\n";
  }
  for (const std::string& key : unset) out += fmt::format("# {} = (not set)\n", key);
  return out;
}

std::vector<std::string> rewrite_flag_aliases(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg.substr(0, arg.find('='));
    if (i > 0 && std::find(std::begin(kDownloadFlags), std::end(kDownloadFlags), name) !=
                     std::end(kDownloadFlags)) {
      fail(ErrorCode::kInvalidArgument,
           "{} downloads a model, and rapide makes no downloads: give a local file with "
           "--model PATH (a GGUF file, a llama2.c checkpoint or a Hugging Face folder)",
           name);
    }
    const auto alias = std::find_if(std::begin(kDashAliases), std::end(kDashAliases),
                                    [&](const DashAlias& a) { return name == a.from; });
    if (i == 0 || alias == std::end(kDashAliases)) {
      out.push_back(arg);
      continue;
    }
    const bool value_attached = name.size() != arg.size();
    if (alias->to == nullptr) {
      std::fprintf(stderr, "note: %s\n", alias->note);
      if (!value_attached && i + 1 < argc) ++i;  // its value goes with it
      continue;
    }
    out.push_back(std::string(alias->to) + arg.substr(name.size()));
  }
  return out;
}

std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::string::npos;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(typed, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // A third of the name may be wrong: "--ctx-siz" finds "--ctx-size", "--xyz" finds nothing.
  if (best.empty() || best_distance * 3 > std::max(typed.size(), best.size())) return "";
  return best;
}

void apply_cli_conventions(CLI::App& app) {
  app.failure_message(one_line_failure);
  app.set_config("--config", "",
                 "read flags from a TOML file: 'ctx-size = 4096' lines for the subcommand run, "
                 "[serve] sections for one subcommand");
  app.config_formatter(std::make_shared<SubcommandConfig>(app));
  // A dry run: the flags a command would run with, after the file, the environment and the
  // command line are merged. It runs before any subcommand's callback (CLI11 calls the top
  // level's parse-complete callback first), so nothing loads or listens.
  CLI::Option* print_config =
      app.add_flag("--print-config")
          ->description(
              "print the flags in effect (command line, environment, --config file) as a --config "
              "file, and exit without running");
  print_config->configurable(false);
  app.parse_complete_callback([&app, print_config] {
    if (print_config->count() == 0) return;
    std::fputs(effective_config(*deepest_selected(app)).c_str(), stdout);
    throw CLI::Success();
  });
  // `rapide serve --config FILE`: --config belongs to the top level, reached from a
  // subcommand's arguments through fallthrough.
  app.allow_config_extras(CLI::config_extras_mode::error);
  for (CLI::App* command : app.get_subcommands({})) {
    add_env_names(*command);
    command->fallthrough();
    command->allow_config_extras(CLI::config_extras_mode::error);
    for (CLI::App* sub : command->get_subcommands({})) add_env_names(*sub);
  }
}

int exit_for_parse_error(CLI::App& app, const CLI::ParseError& e) {
  const int code = app.exit(e);  // prints help, version or the failure message
  return code == 0 ? 0 : kUsageExitCode;
}

}  // namespace rapide::cli
