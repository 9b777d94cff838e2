// Memory read bandwidth probe: the roofline that decode speed is reported against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"

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

namespace bandwidth {
// Per-ISA sum of count 64-byte lines (the result only keeps the reads from being elided).
uint64_t sum_lines_scalar(const uint8_t* data, size_t lines);
uint64_t sum_lines_avx2(const uint8_t* data, size_t lines);
uint64_t sum_lines_avx512(const uint8_t* data, size_t lines);
}  // namespace bandwidth

}  // namespace rapide
