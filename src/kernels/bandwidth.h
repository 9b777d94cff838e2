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

namespace bandwidth {
// Per-ISA sum of count 64-byte lines (the result only keeps the reads from being elided).
uint64_t sum_lines_scalar(const uint8_t* data, size_t lines);
uint64_t sum_lines_avx2(const uint8_t* data, size_t lines);
uint64_t sum_lines_avx512(const uint8_t* data, size_t lines);
}  // namespace bandwidth

}  // namespace rapide
