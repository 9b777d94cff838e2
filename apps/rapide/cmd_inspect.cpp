#include "apps/rapide/commands.h"

namespace rapide::cli {

void register_inspect(CLI::App& app) {
  app.add_subcommand("inspect", "(not built yet)");
}

}  // namespace rapide::cli
