#include "base/cpu_features.h"

#include <cpuid.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace rapide {

namespace {

CpuFeatures detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  // CPUID.1:ECX.F16C read directly: clang (the fuzz build) has no "f16c" for
  // __builtin_cpu_supports.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  f.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  return f;
}

}  // namespace

IsaLevel CpuFeatures::best_level() const {
  if (avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && avx512bf16 && f16c && fma)
    return IsaLevel::kAvx512;
  if (avx2 && fma && f16c) return IsaLevel::kAvx2;
  return IsaLevel::kScalar;
}

std::string CpuFeatures::describe() const {
  std::string s;
  const std::pair<const char*, bool> flags[] = {
      {"avx2", avx2},         {"fma", fma},           {"f16c", f16c},
      {"avx512f", avx512f},   {"avx512bw", avx512bw}, {"avx512vl", avx512vl},
      {"avx512dq", avx512dq}, {"avx512vnni", avx512vnni}, {"avx512bf16", avx512bf16}};
  for (const auto& [name, present] : flags) {
    if (!present) continue;
    if (!s.empty()) s += ' ';
    s += name;
  }
  if (s.empty()) s = "(no SIMD extensions)";
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

IsaLevel active_isa_level() {
  static const IsaLevel level = [] {
    IsaLevel best = cpu_features().best_level();
    const char* env = std::getenv("RAPIDE_ISA");
    if (env == nullptr) return best;
    IsaLevel wanted = best;
    if (std::strcmp(env, "scalar") == 0) wanted = IsaLevel::kScalar;
    if (std::strcmp(env, "avx2") == 0) wanted = IsaLevel::kAvx2;
    if (std::strcmp(env, "avx512") == 0) wanted = IsaLevel::kAvx512;
    return wanted < best ? wanted : best;
  }();
  return level;
}

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar: return "scalar";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx512: return "avx512";
  }
  return "?";
}

int physical_core_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int allowed = 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) allowed = CPU_COUNT(&set);
  if (allowed <= 0) allowed = static_cast<int>(std::thread::hardware_concurrency());
  // Count distinct (package, core) pairs among the allowed CPUs: SMT siblings share a core.
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core_file(base + "core_id"), package_file(base + "physical_package_id");
    int core = -1, package = -1;
    if (!(core_file >> core) || !(package_file >> package)) return allowed > 0 ? allowed : 1;
    cores.insert({package, core});
  }
  int n = static_cast<int>(cores.size());
  return n > 0 ? n : (allowed > 0 ? allowed : 1);
}

}  // namespace rapide
