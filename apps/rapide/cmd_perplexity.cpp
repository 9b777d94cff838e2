#include "apps/rapide/commands.h"

namespace rapide::cli {

void register_perplexity(CLI::App& app) {
  app.add_subcommand("perplexity", "(not built yet)");
}

}  // namespace rapide::cli
