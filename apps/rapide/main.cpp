// rapide: a CPU LLM inference server and optimization toolkit. See README.md.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "apps/rapide/cli_conventions.h"
#include "apps/rapide/commands.h"
#include "apps/rapide/version.h"
#include "base/error.h"
#include "base/logging.h"
#include "distributed/parallel_job.h"

int main(int argc, char** argv) {
  rapide::init_logging();
  CLI::App app{"rapide: LLM inference on CPUs that tells you why it is slow"};
  app.name(rapide::program_name());
  app.require_subcommand(1);
  app.set_version_flag("--version", rapide::cli::version_text);
  rapide::cli::register_inspect(app);
  rapide::cli::register_synth(app);
  rapide::cli::register_quantize(app);
  rapide::cli::register_run(app);
  rapide::cli::register_chat(app);
  rapide::cli::register_perplexity(app);
  rapide::cli::register_batch(app);
  rapide::cli::register_serve(app);
  rapide::cli::register_bench(app);
  rapide::cli::register_advise(app);
  rapide::cli::register_tokenize(app);
  rapide::cli::register_detokenize(app);
  rapide::cli::register_prune(app);
  rapide::cli::register_distill(app);
  rapide::cli::register_compress(app);
  rapide::cli::register_lora(app);
  rapide::cli::apply_cli_conventions(app);
  try {
    std::vector<std::string> args = rapide::cli::rewrite_flag_aliases(argc, argv);
    std::reverse(args.begin() + 1, args.end());  // CLI11 takes them last-first
    args.erase(args.begin());
    app.parse(std::move(args));
  } catch (const CLI::ParseError& e) {
    return rapide::cli::exit_for_parse_error(app, e);
  } catch (const rapide::Error& e) {
    // A malformed argument found by a command (a flag's value, flags that exclude each other)
    // is a usage error like the ones CLI11 finds while parsing: exit 2 for every one of them.
    // Everything else (missing or corrupt files, limits, failed runs) is a failure: exit 1.
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.code() == rapide::ErrorCode::kInvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
