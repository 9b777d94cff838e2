// GeGLU's activation as llama.cpp's CPU backend computes it (gemma2): GELU in its tanh form,
// read from a 65536-entry f16 table indexed by the input rounded to f16, with the input
// passed through above 10 and zero below -10. Emulating the table (not computing GELU
// exactly) is what keeps a 26-layer gemma2 within ~0.02 of llama.cpp's logits instead of
// ~0.17 (shared/reference/llamacpp README 6.2, 6.3). The AVX2 twin (ops_gelu_avx2.cpp)
// converts and gathers eight at a time: the scalar loop's software f16 conversions cost a
// synth100m-sized gemma3 decode step 0.3-0.4 ms (25-35 us per 2048-wide row, against 0.6
// for silu_mul), a few percent of the step.
// soft_cap lives here too: gemma2 is its only user and it is as plain.
#include <array>
#include <cmath>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace rapide {

namespace {

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

}  // namespace

const uint16_t* ops::gelu_f16_table() {
  static const std::array<uint16_t, 65537> table = [] {
    std::array<uint16_t, 65537> t{};
    for (uint32_t i = 0; i < 65536; ++i) {
      t[i] = fp32_to_fp16(gelu_tanh(fp16_to_fp32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return table.data();
}

void ops::scalar::gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  const uint16_t* table = gelu_f16_table();
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    float y;
    if (g <= -10.0f) {
      y = 0.0f;
    } else if (g >= 10.0f) {
      y = g;
    } else {
      y = fp16_to_fp32(table[fp32_to_fp16(g)]);
    }
    out[i] = y * up[i];
  }
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  static const bool avx2 = active_isa_level() >= IsaLevel::kAvx2;
  if (avx2) return ops::avx2::gelu_tanh_mul(gate, up, n, out);
  ops::scalar::gelu_tanh_mul(gate, up, n, out);
}

void soft_cap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

}  // namespace rapide
