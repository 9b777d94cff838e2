// What `rapide --version` prints: the release, the commit the binary was built from, the
// build type, the kernel ISA this machine will run (src/base/cpu_features.h) and what runs
// ranks (Open MPI in rapide-mpi, none in rapide), so a bug report or a benchmark figure names
// exactly what produced it.
#pragma once

#include <string>

namespace rapide::cli {

// e.g. "rapide 0.1.0\ncommit 6c5e8e0a1b2c\nbuild Release\nkernels avx512 (cpu: avx2 ...)\n
// mpi Open MPI v4.1.4".
std::string version_text();
// The parts of it: "0.1.0", the commit ("6c5e8e0a1b2c", "-dirty" when built from a changed
// tree) and the build type, for the server's /version and /props.
std::string version_number();
std::string build_commit();
std::string build_type();

}  // namespace rapide::cli
