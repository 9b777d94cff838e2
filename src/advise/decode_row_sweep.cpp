#include "advise/decode_row_sweep.h"

#include <algorithm>
#include <random>

#include "base/clock.h"
#include "base/error.h"
#include "base/percentile.h"
#include "model/batch.h"
#include "model/contiguous_kv_store.h"

namespace rapide::advise {

namespace {

// A step of the most rows slower than this: each point is timed once (a sweep of a 7B model
// at 64 rows would otherwise take minutes).
constexpr double kSlowStepSeconds = 0.25;

// The engine's paged pool hands blocks out as sequences grow side by side, so a sequence's
// blocks lie far apart; a contiguous store would time attention reading each sequence's KV
// in one run. Block j of sequence s is block j * sequences + s here, as in a pool that grew
// every sequence by one block in turn.
class InterleavedKvStore final : public KvStore {
 public:
  InterleavedKvStore(const ModelConfig& config, int sequences, int positions, KvType type,
                     int block_size)
      : inner_(config, sequences, positions, type, block_size) {
    const int per_sequence = inner_.max_context() / inner_.layout().block_size;
    per_sequence_ = static_cast<size_t>(per_sequence);
    tables_.resize(static_cast<size_t>(sequences) * per_sequence_);
    for (int s = 0; s < sequences; ++s) {
      for (int j = 0; j < per_sequence; ++j) {
        tables_[static_cast<size_t>(s) * per_sequence_ + static_cast<size_t>(j)] =
            j * sequences + s;
      }
    }
  }
  const KvLayout& layout() const override { return inner_.layout(); }
  std::span<const int32_t> block_table(int32_t seq_id) const override {
    return {tables_.data() + static_cast<size_t>(seq_id) * per_sequence_, per_sequence_};
  }
  uint8_t* block_data(int32_t block) override { return inner_.block_data(block); }

 private:
  ContiguousKvStore inner_;  // its memory; its own tables are not used
  size_t per_sequence_ = 0;
  std::vector<int32_t> tables_;
};

}  // namespace

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
  InterleavedKvStore kv(config, max_rows, positions, o.kv_type, o.block_size);

  const std::vector<int> rows = sweep_row_counts(max_rows);
  std::vector<std::vector<double>> seconds(rows.size());
  std::mt19937 rng(7);
  Batch batch;
  auto step_of = [&](int n) {
    batch.clear();
    for (int s = 0; s < n; ++s) {
      batch.add(static_cast<int32_t>(rng() % config.vocab_size), s, o.context, true);
    }
    const TimePoint start = Clock::now();
    model.forward(batch, kv, pool);
    return seconds_between(start, Clock::now());
  };
  // A large model's steps: one timed step a point, once, so the sweep stays within seconds.
  int steps = o.steps, repeats = o.repeats;
  if (step_of(max_rows) > kSlowStepSeconds) steps = repeats = 1;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int step = 0; step <= steps; ++step) {
        const double t = step_of(rows[i]);
        // The first step of a point warms what the previous point's rows evicted.
        if (step > 0) seconds[i].push_back(t);
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
