// Each subcommand lives in its own cmd_*.cpp and registers itself on the CLI here.
#pragma once

#include <CLI/CLI.hpp>

namespace rapide::cli {

// Each function adds a subcommand to `app` and arranges for it to run when chosen.
void register_inspect(CLI::App& app);
void register_synth(CLI::App& app);
void register_quantize(CLI::App& app);
void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_batch(CLI::App& app);
void register_serve(CLI::App& app);
void register_bench(CLI::App& app);
void register_advise(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_detokenize(CLI::App& app);
void register_prune(CLI::App& app);
void register_distill(CLI::App& app);
void register_compress(CLI::App& app);
void register_lora(CLI::App& app);

}  // namespace rapide::cli
