#include "advise/decode_row_sweep.h"

#include <algorithm>
#include <random>

#include "base/clock.h"
#include "base/error.h"
#include "base/percentile.h"
#include "model/batch.h"
#include "model/contiguous_kv_store.h"

namespace rapide::advise {

std::vector<int> sweep_row_counts(int max_rows) {
  std::vector<int> rows;
  for (int r = 1; r < max_rows; r *= 2) rows.push_back(r);
  rows.push_back(std::max(1, max_rows));
  return rows;
}

DecodeCurve sweep_decode_rows(Model& model, ThreadPool& pool, const DecodeSweepOptions& o) {
  if (o.context < 1 || o.max_rows < 1 || o.steps < 1 || o.repeats < 1) {
    fail(ErrorCode::kInvalidArgument, "decode sweep: context {}, rows {}, steps {}, repeats {}",
         o.context, o.max_rows, o.steps, o.repeats);
  }
  const ModelConfig& config = model.config();
  const int positions = o.context + 1;
  const KvLayout layout = KvLayout::for_model(config, o.block_size, o.kv_type);
  const uint64_t per_sequence =
      static_cast<uint64_t>(layout.block_bytes()) *
      static_cast<uint64_t>((positions + o.block_size - 1) / o.block_size);
  // Fewer rows rather than more memory than the cap: the curve then stops earlier and is
  // continued along its last segment.
  const int max_rows = static_cast<int>(std::clamp<uint64_t>(
      o.max_kv_bytes / std::max<uint64_t>(per_sequence, 1), 1, static_cast<uint64_t>(o.max_rows)));
  ContiguousKvStore kv(config, max_rows, positions, o.kv_type, o.block_size);

  const std::vector<int> rows = sweep_row_counts(max_rows);
  std::vector<std::vector<double>> seconds(rows.size());
  std::mt19937 rng(7);
  Batch batch;
  for (int repeat = 0; repeat < o.repeats; ++repeat) {
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int step = 0; step <= o.steps; ++step) {
        batch.clear();
        for (int s = 0; s < rows[i]; ++s) {
          batch.add(static_cast<int32_t>(rng() % config.vocab_size), s, o.context, true);
        }
        const TimePoint start = Clock::now();
        model.forward(batch, kv, pool);
        // The first step of a point warms what the previous point's rows evicted.
        if (step > 0) seconds[i].push_back(seconds_between(start, Clock::now()));
      }
    }
  }
  DecodeCurve curve;
  curve.context = o.context;
  for (size_t i = 0; i < rows.size(); ++i) {
    curve.points.push_back(DecodeCurvePoint{rows[i], median(seconds[i])});
  }
  return curve;
}

}  // namespace rapide::advise
