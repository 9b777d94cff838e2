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

// GeGLU through ggml's f16 GELU table (ops_gelu.cpp): 65536 entries indexed by the input's
// f16 bits, plus one zero entry so a 32-bit gather at the last index stays inside.
const uint16_t* gelu_f16_table();
namespace scalar {
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
}
namespace avx2 {
// The same bits as the scalar twin: F16C rounds to nearest even as fp32_to_fp16 does, and the
// lookup is a gather of the table's entries.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
}  // namespace avx2

}  // namespace rapide::ops
