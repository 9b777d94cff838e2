// The decode row sweep: times decode steps of 1, 2, 4, ... rows on the engine's model and
// threads, each row attending to `context` positions of its own KV, and returns the curve
// (advise/decode_curve.h) the KV-capacity levers are predicted with.
//
// Each row's KV blocks are interleaved with the other rows' (as in the engine's paged pool,
// where sequences grow side by side). Each timed step writes its token at the same position
// (`context`), so every step of the sweep reads the same amount of KV and the store holds max_rows
// x (context + 1) positions (zeroed: the values do not change the cost). The row counts are
// interleaved over the repeats and each point is the median step, so a burst of other load on a
// shared machine moves every point alike: the advisor uses the curve's ratios, never its absolute
// times.
//
// Cost: (points x repeats x (steps + 1)) forward passes, about a second on a 100M-parameter
// model; when one step of the most rows takes over 0.25 s, one repeat of one timed step; the KV it
// allocates is capped at `max_kv_bytes` (fewer rows when the context is long).
#pragma once

#include <cstdint>
#include <vector>

#include "advise/decode_curve.h"
#include "base/thread_pool.h"
#include "kv/kv_store.h"
#include "model/model.h"

namespace rapide::advise {

struct DecodeSweepOptions {
  int context = 128;  // positions each row attends to
  int max_rows = 32;  // the largest row count timed (powers of two up to it, and it)
  int steps = 3;      // timed decode steps per point and repeat (after one untimed)
  int repeats = 3;
  KvType kv_type = KvType::kF16;
  int block_size = 16;
  uint64_t max_kv_bytes = uint64_t{512} << 20;
};

// The row counts timed: 1, 2, 4, ... below max_rows, then max_rows.
std::vector<int> sweep_row_counts(int max_rows);

// Throws what the model throws (e.g. a context beyond the model's).
DecodeCurve sweep_decode_rows(Model& model, ThreadPool& pool, const DecodeSweepOptions& options);

}  // namespace rapide::advise
