// The per-ISA variants behind ops.h, exposed so tests can compare them with the scalar ones.
#pragma once

#include <cstdint>

namespace rapide::ops {

#define RAPIDE_DECLARE_OPS(ns)                                                          \
  namespace ns {                                                                        \
  void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out); \
  void add(const float* a, const float* b, int64_t n, float* out);                      \
  void silu_mul(const float* gate, const float* up, int64_t n, float* out);             \
  void softmax(float* x, int64_t n);                                                    \
  void to_fp16(const float* x, int64_t n, uint16_t* out);                               \
  }
RAPIDE_DECLARE_OPS(scalar)
RAPIDE_DECLARE_OPS(avx512)
#undef RAPIDE_DECLARE_OPS

}  // namespace rapide::ops
