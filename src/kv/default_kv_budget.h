// `--kv-memory auto`, the default: a KV budget sized at start-up to what the model needs and
// what the machine can give, instead of a fixed size that a busy moment could refuse.
//
// Contract of the rule (default_kv_budget):
//   need   one sequence at full context: ceil(context / block_size) blocks of block_bytes;
//          want = need x sequences (--max-seqs): every sequence at full context at once.
//          More than `want` the engine can never use for running sequences.
//   cap    at most `cap` (1 GiB, the old fixed default: a large model takes what it took),
//          but never less than `need`: a server that cannot hold one full-context sequence
//          refuses long requests it advertises.
//   memory at most what the machine can give (MemAvailable, and the cgroup's limit less its
//          usage) less a quarter of it, kept back for the server's other allocations
//          (activations, logits, HTTP buffers, the offload tier) and for other jobs.
//          Unknown memory (not Linux): want and cap alone decide.
//   short  when `need` is more than the memory allows: what the memory allows, flagged
//          short_of_context (the engine warns; admission refuses requests longer than the
//          budget holds), so a busy moment shrinks the server instead of stopping it.
//   fails  with Error(kExceedsCapacity) naming the numbers and --kv-memory when the memory
//          allows fewer than kMinAutoPositions positions (or the context, if shorter).
// The result is whole blocks, so the logged size is what the engine allocates.
//
// The model's weights are not subtracted: the engine sizes its KV after the model is loaded,
// and loading packs every weight matrix into the process's own memory
// (WeightMatrix::prepare_rows), which MemAvailable already no longer counts.
//
// choose_kv_budget applies the flag: an explicit size wins and is checked against the machine
// as before (check_budget_fits); "auto" runs the rule. Both are pure: the machine's figures
// come in as a MachineMemory (kv/machine_memory.h, read_machine_memory()).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kv/machine_memory.h"

namespace rapide {

// The most `auto` takes when full concurrency would need more (the old fixed default).
constexpr uint64_t kAutoKvCap = uint64_t{1} << 30;
// The fewest positions auto settles for when one full-context sequence does not fit.
constexpr int kMinAutoPositions = 2048;

// "auto", case-insensitive, surrounding spaces ignored.
bool is_auto_kv_memory(std::string_view text);

// What the model's KV cache needs, in the engine's terms.
struct KvDemand {
  uint64_t block_bytes = 0;  // one block of the layout: all layers, K and V (KvLayout)
  int block_size = 16;       // token positions per block
  int context = 0;           // positions one sequence may hold (the engine's context)
  int sequences = 1;         // sequences at full context to provide for (--max-seqs)
};

struct KvBudgetChoice {
  uint64_t bytes = 0;
  bool automatic = false;
  bool short_of_context = false;  // automatic, and less than one sequence at full context
  std::string explanation;        // automatic only: "20.0 MiB (context 512 x 64 sequences x ...)"
};

// The rule above. Throws Error(kInvalidArgument) for an empty demand (no block bytes, context
// or sequences) and Error(kExceedsCapacity) when not even kMinAutoPositions positions fit.
KvBudgetChoice default_kv_budget(const KvDemand& demand, const MachineMemory& machine,
                                 uint64_t cap = kAutoKvCap);

// --kv-memory's value: "auto" runs default_kv_budget; anything else is parsed
// (parse_memory_budget, fractions of machine.mem_available) and must fit what the machine can
// give (check_budget_fits).
KvBudgetChoice choose_kv_budget(std::string_view flag, const KvDemand& demand,
                                const MachineMemory& machine, uint64_t cap = kAutoKvCap);

}  // namespace rapide
