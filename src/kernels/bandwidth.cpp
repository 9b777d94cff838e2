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

ReadBandwidthProbe::ReadBandwidthProbe(size_t bytes, int passes)
    : lines_(std::max<size_t>(bytes / 64, 1)), passes_(std::max(1, passes)) {}

bool ReadBandwidthProbe::run_piece(ThreadPool& pool) {
  if (static_cast<int>(rates_.size()) >= passes_) return true;
  if (buffer_.size() == 0) {
    buffer_ = matmul::WeightBuffer(lines_ * 64);
    uint8_t* data = buffer_.data();
    // Each thread touches the part it will read, so pages land near the thread that uses them.
    pool.parallel_for(static_cast<int64_t>(lines_), 1024, [&](int64_t l0, int64_t l1, int) {
      std::memset(data + l0 * 64, 1, static_cast<size_t>(l1 - l0) * 64);
    });
    sink_.assign(static_cast<size_t>(pool.size()), 0);
    return false;
  }
  auto sum = bandwidth::sum_lines_scalar;
  if (active_isa_level() >= IsaLevel::kAvx2) sum = bandwidth::sum_lines_avx2;
  if (active_isa_level() >= IsaLevel::kAvx512) sum = bandwidth::sum_lines_avx512;
  const uint8_t* data = buffer_.data();
  if (sink_.size() < static_cast<size_t>(pool.size()))
    sink_.resize(static_cast<size_t>(pool.size()));
  const auto start = std::chrono::steady_clock::now();
  pool.parallel_for(static_cast<int64_t>(lines_), 1024, [&](int64_t l0, int64_t l1, int thread) {
    sink_[static_cast<size_t>(thread)] += sum(data + l0 * 64, static_cast<size_t>(l1 - l0));
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rates_.push_back(static_cast<double>(lines_ * 64) / seconds);
  // Keep the sums observable so the reads cannot be optimised away.
  volatile uint64_t keep = 0;
  for (uint64_t s : sink_) keep = keep + s;
  if (static_cast<int>(rates_.size()) < passes_) return false;
  buffer_ = matmul::WeightBuffer();  // done: the memory goes back now
  return true;
}

ReadBandwidth ReadBandwidthProbe::result() const {
  if (rates_.empty()) return {};
  std::vector<double> sorted = rates_;
  std::sort(sorted.begin(), sorted.end());
  return {sorted.back(), sorted[sorted.size() / 2]};
}

ReadBandwidth measure_read_bandwidth_passes(ThreadPool& pool, size_t bytes, int passes) {
  ReadBandwidthProbe probe(bytes, passes);
  while (!probe.run_piece(pool)) {
  }
  return probe.result();
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes) {
  return measure_read_bandwidth_passes(pool, bytes, 4).best;
}

}  // namespace rapide
