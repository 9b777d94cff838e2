#include "kv/default_kv_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "kv/memory_budget.h"

namespace rapide {
namespace {

// The share of what the machine can give that auto leaves to everything else (see header).
constexpr uint64_t kKeptBackDivisor = 4;

uint64_t saturating_multiply(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

std::string plural(int n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// "20.1 GiB available", with where the bound comes from when the cgroup sets it.
std::string available_text(const MachineMemory& machine) {
  const std::optional<uint64_t> can_give = machine.can_give();
  if (!can_give) return "available memory unknown";
  return fmt::format("{} available{}", format_bytes(*can_give),
                     machine.cgroup_binds() ? " under the cgroup's memory limit" : "");
}

}  // namespace

bool is_auto_kv_memory(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  if (text.size() != 4) return false;
  for (size_t i = 0; i < 4; ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) != "auto"[i]) return false;
  }
  return true;
}

KvBudgetChoice default_kv_budget(const KvDemand& d, const MachineMemory& machine, uint64_t cap) {
  if (d.block_bytes == 0 || d.block_size < 1 || d.context < 1 || d.sequences < 1) {
    fail(ErrorCode::kInvalidArgument,
         "kv memory auto: no KV demand to size ({} bytes per block of {}, context {}, {})",
         d.block_bytes, d.block_size, d.context, plural(d.sequences, "sequence"));
  }
  const uint64_t blocks_per_sequence =
      (static_cast<uint64_t>(d.context) + static_cast<uint64_t>(d.block_size) - 1) /
      static_cast<uint64_t>(d.block_size);
  const uint64_t need = saturating_multiply(blocks_per_sequence, d.block_bytes);
  const uint64_t want = saturating_multiply(need, static_cast<uint64_t>(d.sequences));
  const std::string per_token = format_bytes(d.block_bytes / static_cast<uint64_t>(d.block_size));
  const std::string demand = fmt::format("context {} x {} x {}/token", d.context,
                                         plural(d.sequences, "sequence"), per_token);

  const uint64_t bound = std::max(cap, need);  // the cap never goes below one sequence
  const std::optional<uint64_t> can_give = machine.can_give();
  const uint64_t usable = can_give ? *can_give - *can_give / kKeptBackDivisor : UINT64_MAX;
  KvBudgetChoice choice;
  choice.automatic = true;
  if (need > usable) {
    // Less than one full-context sequence: serve the requests that fit (admission refuses
    // longer ones by name) rather than refuse to start, down to kMinAutoPositions.
    const uint64_t floor_blocks = (static_cast<uint64_t>(std::min(d.context, kMinAutoPositions)) +
                                   static_cast<uint64_t>(d.block_size) - 1) /
                                  static_cast<uint64_t>(d.block_size);
    const uint64_t blocks = usable / d.block_bytes;
    if (blocks < floor_blocks) {
      fail(ErrorCode::kExceedsCapacity,
           "kv memory auto: one sequence at full context needs {} of KV cache (context {} x {}/"
           "token), and this machine can give the KV cache only {} (three quarters of {}), less "
           "than {} positions; give --kv-memory SIZE, a shorter --ctx-size, or a smaller "
           "--kv-type (q8_0, q4_0)",
           format_bytes(need), d.context, per_token, format_bytes(usable), available_text(machine),
           std::min(d.context, kMinAutoPositions));
    }
    choice.bytes = blocks * d.block_bytes;
    choice.short_of_context = true;
    const uint64_t positions = blocks * static_cast<uint64_t>(d.block_size);
    choice.explanation = fmt::format(
        "{} (limited by memory: one sequence at full context needs {} (context {} x {}/token), "
        "three quarters of {} holds {} positions; requests longer than that are refused; "
        "--ctx-size {} or a smaller --kv-type to match)",
        format_bytes(choice.bytes), format_bytes(need), d.context, per_token,
        available_text(machine), positions, positions);
    return choice;
  }

  // Whole blocks: what the engine allocates is what the log line says.
  choice.bytes = std::min({want, bound, usable}) / d.block_bytes * d.block_bytes;
  const std::string size = format_bytes(choice.bytes);
  const int full_sequences = static_cast<int>(choice.bytes / need);
  if (choice.bytes == want / d.block_bytes * d.block_bytes) {
    choice.explanation = fmt::format("{} ({}; {})", size, demand, available_text(machine));
  } else if (bound <= usable) {
    choice.explanation =
        need > cap
            ? fmt::format(
                  "{} (one sequence at full context, above the {} cap: {} would take {}; "
                  "{}; --kv-memory SIZE for more)",
                  size, format_bytes(cap), demand, format_bytes(want), available_text(machine))
            : fmt::format(
                  "{} (capped: {} would take {}; {} at full context; {}; --kv-memory "
                  "SIZE for more)",
                  size, demand, format_bytes(want), plural(full_sequences, "sequence"),
                  available_text(machine));
  } else {
    choice.explanation = fmt::format(
        "{} (limited by memory: {} would take {}; three quarters of {}; {} at full context)", size,
        demand, format_bytes(want), available_text(machine), plural(full_sequences, "sequence"));
  }
  return choice;
}

KvBudgetChoice choose_kv_budget(std::string_view flag, const KvDemand& demand,
                                const MachineMemory& machine, uint64_t cap) {
  if (is_auto_kv_memory(flag)) return default_kv_budget(demand, machine, cap);
  KvBudgetChoice choice;
  // A fraction needs MemAvailable; without it the one-argument parse names what to give.
  try {
    choice.bytes = machine.mem_available ? parse_memory_budget(flag, *machine.mem_available)
                                         : parse_memory_budget(flag);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    fail(ErrorCode::kInvalidArgument, "{}; or auto (the default: sized to the model and free RAM)",
         e.what());
  }
  check_budget_fits(choice.bytes, machine.can_give().value_or(UINT64_MAX));
  return choice;
}

}  // namespace rapide
