// The KV cache's memory budget (`--kv-memory`): an absolute size or a share of free RAM.
//
// Why one budget in bytes rather than a block count: the operator thinks in memory, while
// the number of blocks it buys depends on the model (layers, KV heads, head size) and the
// KV element type; BlockPool::blocks_for_budget turns one into the other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rapide {

// Accepted forms (case-insensitive, surrounding spaces ignored):
//   "2GiB", "512MiB", "64KiB", "1TiB"     binary units
//   "1.5G", "512M", "64K", "1T"           binary units too (as in llama.cpp and docker)
//   "2GB", "500MB", "64KB", "1TB"         decimal units (10^9, 10^6, ...)
//   "1048576", "1048576B"                 plain bytes (a whole number above 1)
//   "0.5", "1", "50%"                     a fraction in (0, 1] of MemAvailable
// Throws Error(kInvalidArgument) with the accepted forms for anything else, including
// sizes that round to zero bytes.
uint64_t parse_memory_budget(std::string_view text);

// Same, with MemAvailable given (tests; callers that already read /proc/meminfo).
uint64_t parse_memory_budget(std::string_view text, uint64_t mem_available_bytes);

// MemAvailable from /proc/meminfo in bytes. Throws Error(kUnavailable) when the file is
// missing or has no MemAvailable line (non-Linux, very old kernels).
uint64_t mem_available_bytes();

// The memory this process can still get: MemAvailable, lowered by the cgroup's limit minus
// its usage when the process runs in a memory-limited cgroup (v2 memory.max, or v1
// memory.limit_in_bytes), as in a container. UINT64_MAX when /proc/meminfo cannot tell.
uint64_t memory_limit_bytes();

// Throws Error(kExceedsCapacity) naming both sizes when `budget` bytes of KV are more than
// `limit` (memory_limit_bytes()): failing at start beats a long stall, then bad_alloc.
void check_budget_fits(uint64_t budget, uint64_t limit);

// "2.00 GiB", "512.0 MiB", "20.0 KiB", "512 B": for log lines and error messages.
std::string format_bytes(uint64_t bytes);

}  // namespace rapide
