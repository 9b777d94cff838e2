// What the machine can still give this process, read once at start-up: MemAvailable from
// /proc/meminfo and, in a memory-limited cgroup (a container), the cgroup's limit and usage.
//
// Why a plain struct and a separate reader: the rules that use these figures (the check of an
// explicit --kv-memory, kv/memory_budget.h, and the automatic default, kv/default_kv_budget.h)
// are then pure functions that tests drive with made-up machines.
#pragma once

#include <cstdint>
#include <optional>

namespace rapide {

struct MachineMemory {
  std::optional<uint64_t> mem_available;  // MemAvailable; nullopt: unreadable (not Linux)
  std::optional<uint64_t> cgroup_limit;   // v2 memory.max / v1 memory.limit_in_bytes; nullopt:
                                          // no limit ("max") or no cgroup memory controller
  uint64_t cgroup_usage = 0;              // memory.current / memory.usage_in_bytes

  // The cgroup's limit less its usage (0 when usage is at or above it); nullopt: no limit.
  std::optional<uint64_t> cgroup_free() const;
  // The least of MemAvailable and cgroup_free(); nullopt when neither is known.
  std::optional<uint64_t> can_give() const;
  // Whether the cgroup, not MemAvailable, is what can_give() is bound by.
  bool cgroup_binds() const;
};

// Reads the figures above; never throws (what cannot be read stays unknown).
MachineMemory read_machine_memory();

}  // namespace rapide
