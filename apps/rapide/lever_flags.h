// Applying an advisor's lever to a benchmark's options: the flags a Finding names
// ("--prefix-cache on", "--quantize q8_0", ...) set on the same BenchOptions the first run
// used, so `rapide advise --verify` runs the workload again with only the lever changed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "apps/rapide/bench_command.h"

namespace rapide::cli {

// Throws Error(kInvalidArgument) for a flag it does not know. "--quantize TYPE" writes the
// model quantized to TYPE into `scratch_dir` (with `rapide quantize`) and benchmarks that.
void apply_lever(BenchOptions& o, const std::vector<std::pair<std::string, std::string>>& flags,
                 const std::string& scratch_dir);

}  // namespace rapide::cli
