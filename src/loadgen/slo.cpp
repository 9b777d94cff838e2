#include "loadgen/slo.h"

#include <fmt/format.h>

#include <cstdlib>

#include "base/error.h"

namespace rapide::loadgen {

namespace {

double parse_duration(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  const std::string unit(end);
  if (end == value.c_str() || number < 0) {
    fail(ErrorCode::kInvalidArgument, "--slo {}: expected a duration like 500ms, got '{}'", key,
         value);
  }
  if (unit.empty() || unit == "ms") return number / 1e3;
  if (unit == "s") return number;
  if (unit == "us") return number / 1e6;
  fail(ErrorCode::kInvalidArgument, "--slo {}: unknown unit '{}' (us, ms, s)", key, unit);
}

}  // namespace

std::string Slo::to_string() const {
  std::string out;
  const auto add = [&out](const char* key, double seconds) {
    if (seconds < 0) return;
    if (!out.empty()) out += ',';
    out += fmt::format("{}={:g}ms", key, seconds * 1e3);
  };
  add("ttft", ttft);
  add("tpot", tpot);
  add("e2e", e2e);
  return out;
}

Slo parse_slo(const std::string& text) {
  Slo slo;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(start, comma - start);
    start = comma + 1;
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == std::string::npos) {
      fail(ErrorCode::kInvalidArgument, "--slo expects KEY=DURATION, got '{}'", part);
    }
    const std::string key = part.substr(0, eq);
    const double seconds = parse_duration(key, part.substr(eq + 1));
    if (key == "ttft") {
      slo.ttft = seconds;
    } else if (key == "tpot") {
      slo.tpot = seconds;
    } else if (key == "e2e") {
      slo.e2e = seconds;
    } else {
      fail(ErrorCode::kInvalidArgument, "--slo: unknown metric '{}' (ttft, tpot, e2e)", key);
    }
  }
  return slo;
}

bool meets_slo(const RequestRecord& record, const Slo& slo) {
  if (!record.ok()) return false;
  if (slo.ttft >= 0 && !(record.ttft() >= 0 && record.ttft() <= slo.ttft)) return false;
  if (slo.tpot >= 0 && record.tpot() > slo.tpot) return false;
  if (slo.e2e >= 0 && record.e2e() > slo.e2e) return false;
  return true;
}

}  // namespace rapide::loadgen
