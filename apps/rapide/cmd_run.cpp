#include "apps/rapide/commands.h"

namespace rapide::cli {

void register_run(CLI::App& app) {
  app.add_subcommand("run", "(not built yet)");
}

}  // namespace rapide::cli
