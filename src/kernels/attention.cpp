#include "kernels/attention.h"

#include "base/cpu_features.h"

namespace rapide {

AttentionKernel scalar_attention_kernel() {
  return {attend_job_scalar, 4, "scalar"};
}

AttentionKernel select_attention_kernel(int head_dim) {
  const IsaLevel isa = active_isa_level();
  if (isa >= IsaLevel::kAvx512 && head_dim % 16 == 0) return {attend_job_avx512, 12, "avx512"};
  if (isa >= IsaLevel::kAvx2 && head_dim % 8 == 0) return {attend_job_avx2, 4, "avx2"};
  return scalar_attention_kernel();
}

}  // namespace rapide
