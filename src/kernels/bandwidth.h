// Memory read bandwidth probe: the roofline that decode speed is reported against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/weight_memory.h"

namespace rapide {

// Bytes per second that pool's threads together read from a `bytes` buffer (larger than
// the caches) with a streaming SIMD sum; the best of a few passes, so a noisy neighbour
// lowers it less. The buffer lies on transparent huge pages where the system allows it,
// like packed weights (kernels/weight_memory.h). Allocates and touches the buffer first (about a
// second for 1 GiB).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{1} << 30);

// One probe's passes summarised. On a shared VM the passes of one probe, a few milliseconds
// apart, differ by 10-20 % (measured on Zen 5, 2 threads, 30 passes of 256 MiB: best 67.2,
// median 55.9, worst 44.6 GB/s): `best` is the roofline (what the threads read when nothing
// disturbs them), `median` what a run of comparable length meets, the figure to compare a
// decode run's average against.
struct ReadBandwidth {
  double best = 0;    // bytes per second
  double median = 0;  // bytes per second
};
ReadBandwidth measure_read_bandwidth_passes(ThreadPool& pool, size_t bytes, int passes);

// The same probe a piece at a time, for a caller that interleaves it with other work (the
// engine runs one piece between two of its steps): the first piece allocates and touches
// the buffer, each later one times one pass. The buffer is freed after the last pass.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(size_t bytes, int passes);

  // Runs the next piece on `pool`; returns true once every pass is timed (then does nothing).
  bool run_piece(ThreadPool& pool);
  // The passes timed so far (zeros before the first).
  ReadBandwidth result() const;

 private:
  size_t lines_;
  int passes_;
  // The same huge-page backed memory as packed weights: on 4 KiB pages the probe reads
  // slower than the decode kernels stream (measured on Zen 4: about 27 against 30 GB/s for
  // one thread), which would understate the roofline they are measured against.
  matmul::WeightBuffer buffer_;  // empty before the first piece
  std::vector<uint64_t> sink_;
  std::vector<double> rates_;  // bytes per second of each timed pass
};

namespace bandwidth {
// Per-ISA sum of count 64-byte lines (the result only keeps the reads from being elided).
uint64_t sum_lines_scalar(const uint8_t* data, size_t lines);
uint64_t sum_lines_avx2(const uint8_t* data, size_t lines);
uint64_t sum_lines_avx512(const uint8_t* data, size_t lines);
}  // namespace bandwidth

}  // namespace rapide
