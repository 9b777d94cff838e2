#include "kernels/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/weight_memory.h"

namespace rapide {

namespace bandwidth {
uint64_t sum_lines_scalar(const uint8_t* data, size_t lines) {
  uint64_t sum = 0;
  for (size_t i = 0; i < lines * 8; ++i) {
    uint64_t v;
    std::memcpy(&v, data + i * 8, 8);
    sum += v;
  }
  return sum;
}
}  // namespace bandwidth

ReadBandwidth measure_read_bandwidth_passes(ThreadPool& pool, size_t bytes, int passes) {
  const size_t lines = bytes / 64;
  // The same huge-page backed memory as packed weights: on 4 KiB pages the probe reads
  // slower than the decode kernels stream (measured on Zen 4: about 27 against 30 GB/s for
  // one thread), which would understate the roofline they are measured against.
  matmul::WeightBuffer buffer(lines * 64);
  // Each thread touches the part it will read, so pages land near the thread that uses them.
  pool.parallel_for(static_cast<int64_t>(lines), 1024, [&](int64_t l0, int64_t l1, int) {
    std::memset(buffer.data() + l0 * 64, 1, static_cast<size_t>(l1 - l0) * 64);
  });
  auto sum = bandwidth::sum_lines_scalar;
  if (active_isa_level() >= IsaLevel::kAvx2) sum = bandwidth::sum_lines_avx2;
  if (active_isa_level() >= IsaLevel::kAvx512) sum = bandwidth::sum_lines_avx512;
  std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
  std::vector<double> rates;
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<int64_t>(lines), 1024, [&](int64_t l0, int64_t l1, int thread) {
      sink[static_cast<size_t>(thread)] +=
          sum(buffer.data() + l0 * 64, static_cast<size_t>(l1 - l0));
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(lines * 64) / seconds);
  }
  // Keep the sums observable so the reads cannot be optimised away.
  volatile uint64_t keep = 0;
  for (uint64_t s : sink) keep = keep + s;
  std::sort(rates.begin(), rates.end());
  return {rates.back(), rates[rates.size() / 2]};
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes) {
  return measure_read_bandwidth_passes(pool, bytes, 4).best;
}

}  // namespace rapide
