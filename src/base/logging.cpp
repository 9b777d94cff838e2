#include "base/logging.h"

#include <spdlog/cfg/helpers.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace rapide {

namespace {

constexpr const char* kTextPattern = "%^[%Y-%m-%d %H:%M:%S.%e %L]%$ %v";

std::atomic<LogFormat> g_format{LogFormat::kText};

// {"time": "2026-12-01T06:30:38.123", "level": "info", "msg": "..."} per line, or the
// message's own members in place of "msg" when the message is a JSON object.
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const std::time_t seconds =
        std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000;
    std::tm local{};
    localtime_r(&seconds, &local);
    char time_text[32];
    std::strftime(time_text, sizeof(time_text), "%Y-%m-%dT%H:%M:%S", &local);
    nlohmann::ordered_json line;
    line["time"] = fmt::format("{}.{:03d}", time_text, static_cast<int>(millis));
    const auto level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    const std::string_view text(msg.payload.data(), msg.payload.size());
    nlohmann::ordered_json fields;
    if (text.starts_with('{')) {
      fields = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    }
    if (fields.is_object()) {
      for (auto& [key, value] : fields.items()) line[key] = value;
    } else {
      line["msg"] = std::string(text);
    }
    const std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(out.data(), out.data() + out.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLineFormatter>();
  }
};

}  // namespace

void init_logging() {
  auto logger = spdlog::stderr_color_mt("rapide");
  logger->set_pattern(kTextPattern);
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::info);
  if (const char* levels = std::getenv("RAPIDE_LOG")) spdlog::cfg::helpers::load_levels(levels);
}

void configure_logging(const LogSettings& settings) {
  LogFormat format;
  if (settings.format == "text") {
    format = LogFormat::kText;
  } else if (settings.format == "json") {
    format = LogFormat::kJson;
  } else {
    fail(ErrorCode::kInvalidArgument, "--log-format must be text or json, got '{}'",
         settings.format);
  }
  spdlog::level::level_enum level = spdlog::default_logger()->level();
  if (!settings.level.empty()) {
    level = spdlog::level::from_str(settings.level);
    // from_str answers "off" for any unknown name: only a real "off" may mean off.
    if (level == spdlog::level::off && settings.level != "off") {
      fail(ErrorCode::kInvalidArgument,
           "--log-level must be trace, debug, info, warn, error, critical or off, got '{}'",
           settings.level);
    }
  }
  spdlog::sink_ptr sink;
  if (settings.file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  } else {
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(settings.file);
    } catch (const spdlog::spdlog_ex& e) {
      fail(ErrorCode::kNotFound, "cannot open --log-file {}: {}", settings.file, e.what());
    }
  }
  if (format == LogFormat::kJson) {
    sink->set_formatter(std::make_unique<JsonLineFormatter>());
  } else {
    sink->set_pattern(kTextPattern);
  }
  auto logger = std::make_shared<spdlog::logger>("rapide", std::move(sink));
  logger->set_level(level);
  // A request's line must reach the file even if the process is killed right after.
  if (!settings.file.empty()) logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  g_format.store(format);
}

LogFormat log_format() {
  return g_format.load();
}

}  // namespace rapide
