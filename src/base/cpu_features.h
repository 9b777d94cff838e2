// What the CPU can do, read once from cpuid; kernels pick their variant from this.
#pragma once

#include <string>

namespace rapide {

enum class IsaLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;

  // The best kernel family this CPU runs (AVX-512 level requires F/BW/VL/DQ/VNNI/BF16).
  IsaLevel best_level() const;
  std::string describe() const;  // e.g. "avx2 fma f16c avx512f ... (using avx512)"
};

// Detected once per process.
const CpuFeatures& cpu_features();

// The ISA level kernels use: the best the CPU supports, lowered by the environment
// variable RAPIDE_ISA=scalar|avx2|avx512 (tests and benchmarks use it to compare variants).
IsaLevel active_isa_level();
const char* isa_level_name(IsaLevel level);

// Physical cores (not SMT siblings) available to this process; at least 1.
int physical_core_count();

}  // namespace rapide
