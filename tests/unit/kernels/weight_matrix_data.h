// Test data for the matrix-product tests: a weight matrix's bytes with the TensorView that
// points at them, and normally distributed activations from a seed.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "formats/model_file.h"

namespace rapide {

struct Matrix {
  std::vector<uint8_t> bytes;
  TensorView view;
};

// Views `m.bytes` (already filled: rows x cols of `type`) as the matrix "w".
inline void point_view(Matrix& m, TensorType type, int64_t rows, int64_t cols) {
  m.view.name = std::string("w");
  m.view.type = type;
  m.view.shape = {cols, rows};
  m.view.data = m.bytes.data();
  m.view.size_bytes = m.bytes.size();
}

inline std::vector<float> random_activations(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = dist(rng);
  return x;
}

}  // namespace rapide
