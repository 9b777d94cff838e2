// Reference attention kernel: plain loops, f16 converted element by element.
#include "base/fp16.h"
#include "model/attention_kernel.h"

namespace rapide {

namespace {

struct ScalarOps {
  static float dot(const float* q, const uint8_t* row, int d, KvType type) {
    float sum = 0.0f;
    if (type == KvType::kF32) {
      const auto* k = reinterpret_cast<const float*>(row);
      for (int i = 0; i < d; ++i) sum += q[i] * k[i];
    } else {
      const auto* k = reinterpret_cast<const uint16_t*>(row);
      for (int i = 0; i < d; ++i) sum += q[i] * fp16_to_fp32(k[i]);
    }
    return sum;
  }
  static void axpy(float a, const uint8_t* row, float* out, int d, KvType type) {
    if (type == KvType::kF32) {
      const auto* v = reinterpret_cast<const float*>(row);
      for (int i = 0; i < d; ++i) out[i] += a * v[i];
    } else {
      const auto* v = reinterpret_cast<const uint16_t*>(row);
      for (int i = 0; i < d; ++i) out[i] += a * fp16_to_fp32(v[i]);
    }
  }
};

}  // namespace

void attend_query_scalar(const AttentionQuery& job) { attend_query_impl<ScalarOps>(job); }

}  // namespace rapide
