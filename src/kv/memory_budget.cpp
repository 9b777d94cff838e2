#include "kv/memory_budget.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include "base/error.h"
#include "kv/machine_memory.h"

namespace rapide {
namespace {

constexpr const char* kAcceptedForms =
    "expected a size such as 2GiB, 512MiB, 1.5G, 2GB or 1048576 (bytes), or a fraction of free "
    "RAM such as 0.5 or 50%";

struct Unit {
  const char* suffix;  // lower case
  double multiplier;
};

// Longest suffixes first so "gib" is not read as "b" after a number "2gi".
constexpr std::array<Unit, 13> kUnits = {{
    {"kib", 1024.0},
    {"mib", 1024.0 * 1024},
    {"gib", 1024.0 * 1024 * 1024},
    {"tib", 1024.0 * 1024 * 1024 * 1024},
    {"kb", 1e3},
    {"mb", 1e6},
    {"gb", 1e9},
    {"tb", 1e12},
    {"k", 1024.0},
    {"m", 1024.0 * 1024},
    {"g", 1024.0 * 1024 * 1024},
    {"t", 1024.0 * 1024 * 1024 * 1024},
    {"b", 1.0},
}};

std::string lower_trimmed(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string out(text.substr(begin, end - begin));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Fractions need MemAvailable; reading /proc/meminfo only when one is given keeps absolute
// sizes working on systems without it.
template <typename AvailableFn>
uint64_t parse(std::string_view original, AvailableFn available) {
  const std::string text = lower_trimmed(original);
  if (text.empty()) fail(ErrorCode::kInvalidArgument, "empty KV memory budget: {}", kAcceptedForms);

  double number = 0.0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, number, std::chars_format::fixed);
  if (ec != std::errc() || end == first || !std::isfinite(number) || number <= 0.0) {
    fail(ErrorCode::kInvalidArgument, "bad KV memory budget '{}': {}", original, kAcceptedForms);
  }
  const std::string suffix(end, last);
  const bool whole = number == std::floor(number);

  if (suffix == "%") {
    if (number > 100.0) {
      fail(ErrorCode::kInvalidArgument, "KV memory budget '{}' is more than 100% of free RAM",
           original);
    }
    number /= 100.0;
  }
  if (suffix == "%" || (suffix.empty() && number <= 1.0)) {
    const uint64_t bytes = static_cast<uint64_t>(number * static_cast<double>(available()));
    if (bytes == 0) {
      fail(ErrorCode::kInvalidArgument, "KV memory budget '{}' of free RAM rounds to 0 bytes",
           original);
    }
    return bytes;
  }
  if (suffix.empty()) {
    if (!whole) {
      fail(ErrorCode::kInvalidArgument,
           "KV memory budget '{}' is neither a fraction in (0, 1] nor a whole byte count: {}",
           original, kAcceptedForms);
    }
    return static_cast<uint64_t>(number);
  }
  for (const Unit& unit : kUnits) {
    if (suffix != unit.suffix) continue;
    const double bytes = number * unit.multiplier;
    if (bytes >= 18446744073709551615.0) {
      fail(ErrorCode::kInvalidArgument, "KV memory budget '{}' is too large", original);
    }
    if (bytes < 1.0) {
      fail(ErrorCode::kInvalidArgument, "KV memory budget '{}' rounds to 0 bytes", original);
    }
    return static_cast<uint64_t>(bytes);
  }
  fail(ErrorCode::kInvalidArgument, "unknown unit '{}' in KV memory budget '{}': {}", suffix,
       original, kAcceptedForms);
}

}  // namespace

uint64_t parse_memory_budget(std::string_view text) {
  return parse(text, [] { return mem_available_bytes(); });
}

uint64_t parse_memory_budget(std::string_view text, uint64_t mem_available) {
  return parse(text, [mem_available] { return mem_available; });
}

uint64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) {
    fail(ErrorCode::kUnavailable,
         "cannot read /proc/meminfo to size the KV cache from free RAM; give an absolute size "
         "such as --kv-memory 2GiB");
  }
  std::string key, unit;
  uint64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // the kernel reports kB (KiB)
  }
  fail(ErrorCode::kUnavailable,
       "/proc/meminfo has no MemAvailable line; give an absolute KV size such as --kv-memory 2GiB");
}

uint64_t memory_limit_bytes() {
  return read_machine_memory().can_give().value_or(UINT64_MAX);
}

void check_budget_fits(uint64_t budget, uint64_t limit) {
  if (budget <= limit) return;
  fail(ErrorCode::kExceedsCapacity,
       "--kv-memory asks for {} of KV cache, but this machine can give only {} (MemAvailable, "
       "and the cgroup's memory limit when there is one); give a smaller size or a fraction "
       "such as --kv-memory 0.5",
       format_bytes(budget), format_bytes(limit));
}

std::string format_bytes(uint64_t bytes) {
  constexpr std::array<const char*, 4> kNames = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", value, value >= 100.0 ? 1 : 2, kNames[unit]);
}

}  // namespace rapide
