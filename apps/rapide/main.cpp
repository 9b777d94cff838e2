// rapide: a CPU LLM inference server and optimization toolkit. See README.md.
#include <cstdio>
#include <exception>

#include "apps/rapide/commands.h"
#include "base/error.h"
#include "base/logging.h"

int main(int argc, char** argv) {
  rapide::init_logging();
  CLI::App app{"rapide: LLM inference on CPUs that tells you why it is slow"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "rapide 0.1.0");
  rapide::cli::register_inspect(app);
  rapide::cli::register_synth(app);
  rapide::cli::register_quantize(app);
  rapide::cli::register_run(app);
  rapide::cli::register_perplexity(app);
  rapide::cli::register_batch(app);
  rapide::cli::register_serve(app);
  rapide::cli::register_bench(app);
  rapide::cli::register_advise(app);
  rapide::cli::register_tokenize(app);
  rapide::cli::register_detokenize(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rapide::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
