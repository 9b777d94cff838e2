// Logging goes through spdlog; this header only fixes the project-wide setup.
#pragma once

#include <spdlog/spdlog.h>

namespace rapide {

// Log to stderr with a compact pattern; level from RAPIDE_LOG (trace..off), default info.
void init_logging();

}  // namespace rapide
