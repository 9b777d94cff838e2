// The rules every subcommand's flags follow, applied once to the whole CLI in main():
//
//  * llama.cpp's multi-letter single-dash spellings (-np, -fa, -ngl) are rewritten before
//    CLI11 sees them (CLI11 short options are one letter); -ngl has no meaning on a CPU and is
//    dropped with a note. Its download flags (-hf, --hf-repo, --hf-file, -mu, ...) are refused
//    by name (Error kInvalidArgument: exit 2): CLI11 would read -hf as -h -f and print help.
//  * Without a subcommand, or with an unknown one, the error lists the subcommands.
//  * Every long flag may come from the environment as RAPIDE_<FLAG> (--ctx-size ->
//    RAPIDE_CTX_SIZE) and from `--config FILE` (TOML: `ctx-size = 4096` lines); the command
//    line wins over the environment, which wins over the file.
//  * `--print-config` prints the flags a command would run with (file, environment and command
//    line merged) as a --config file, every key listed, and exits 0 without running.
//  * Every usage error is one line on stderr, with a "did you mean" for a mistyped flag or
//    subcommand, and exit code 2 (help and --version exit 0).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace rapide::cli {

constexpr int kUsageExitCode = 2;

// argv with the aliases CLI11 cannot express rewritten (argv[0] included). Notes about
// ignored flags go to stderr; a download flag throws Error(kInvalidArgument).
std::vector<std::string> rewrite_flag_aliases(int argc, const char* const* argv);

// Adds RAPIDE_<FLAG> environment names and --config to every subcommand of `app`, and
// installs the one-line failure message.
void apply_cli_conventions(CLI::App& app);

// The subcommand's flags in effect as a --config TOML file: `key=value` for every option with
// a value or a default, a `# key = (not set)` line for the others.
std::string effective_config(const CLI::App& command);

// The closest of `candidates` to `typed` when near enough to be a likely typo, else "".
std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates);

// Prints the usage error (or the help / version text) and returns the exit code.
int exit_for_parse_error(CLI::App& app, const CLI::ParseError& e);

}  // namespace rapide::cli
