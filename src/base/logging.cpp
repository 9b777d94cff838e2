#include "base/logging.h"

#include <spdlog/cfg/helpers.h>

#include <cstdlib>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace rapide {

void init_logging() {
  auto logger = spdlog::stderr_color_mt("rapide");
  logger->set_pattern("%^[%H:%M:%S.%e %L]%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::info);
  if (const char* levels = std::getenv("RAPIDE_LOG")) spdlog::cfg::helpers::load_levels(levels);
}

}  // namespace rapide
