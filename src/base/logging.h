// Logging goes through spdlog; this header only fixes the project-wide setup.
//
// Lines start with the date and time to the millisecond and the level. The text format is
// for people ("[2026-12-01 06:30:38.123 I] message"); the JSON format writes one object per
// line ({"time": ..., "level": ..., "msg": ...}) for log collectors. A message that is itself
// a JSON object (structured events such as a request's summary, see serve/request_log.h)
// has its members spliced into the line's object instead of being quoted as "msg".
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace rapide {

enum class LogFormat { kText, kJson };

struct LogSettings {
  std::string format = "text";  // text | json
  std::string file;             // empty: stderr; else appended to
  std::string level;            // trace..off; empty: RAPIDE_LOG's, else info
};

// Log to stderr with the text format; level from RAPIDE_LOG (trace..off), default info.
void init_logging();

// Reconfigures the default logger from command-line settings. Throws Error(kInvalidArgument)
// for an unknown format or level and kNotFound for a log file that cannot be opened.
void configure_logging(const LogSettings& settings);

// The format configure_logging chose (text until it runs).
LogFormat log_format();

}  // namespace rapide
