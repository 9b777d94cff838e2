#include "apps/rapide/commands.h"

namespace rapide::cli {

void register_synth(CLI::App& app) {
  app.add_subcommand("synth", "(not built yet)");
}

}  // namespace rapide::cli
