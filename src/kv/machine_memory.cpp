#include "kv/machine_memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>
#include <utility>

#include "base/error.h"
#include "kv/memory_budget.h"

namespace rapide {
namespace {

// A number from a cgroup file ("max" and unreadable files give nullopt).
std::optional<uint64_t> read_cgroup_number(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<uint64_t> MachineMemory::cgroup_free() const {
  if (!cgroup_limit) return std::nullopt;
  return *cgroup_limit > cgroup_usage ? *cgroup_limit - cgroup_usage : 0;
}

std::optional<uint64_t> MachineMemory::can_give() const {
  const std::optional<uint64_t> cgroup = cgroup_free();
  if (mem_available && cgroup) return std::min(*mem_available, *cgroup);
  return mem_available ? mem_available : cgroup;
}

bool MachineMemory::cgroup_binds() const {
  const std::optional<uint64_t> cgroup = cgroup_free();
  return cgroup && (!mem_available || *cgroup < *mem_available);
}

MachineMemory read_machine_memory() {
  MachineMemory m;
  try {
    m.mem_available = mem_available_bytes();
  } catch (const Error&) {
    // Not Linux, or no MemAvailable: unknown (the cgroup may still say).
  }
  // v2 first; v1 says "no limit" with a huge number, which never binds below MemAvailable.
  const std::pair<const char*, const char*> cgroups[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
       "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
  };
  for (const auto& [max_path, current_path] : cgroups) {
    const std::optional<uint64_t> max = read_cgroup_number(max_path);
    if (!max) continue;
    const uint64_t used = read_cgroup_number(current_path).value_or(0);
    MachineMemory candidate = m;
    candidate.cgroup_limit = max;
    candidate.cgroup_usage = used;
    // Of the two hierarchies, the one that leaves less (a host may mount both).
    if (!m.cgroup_free() || *candidate.cgroup_free() < *m.cgroup_free()) m = candidate;
  }
  return m;
}

}  // namespace rapide
