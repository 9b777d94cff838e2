#include "apps/rapide/version.h"

#include <fmt/format.h>

#include "base/cpu_features.h"
#include "distributed/parallel_job.h"
#include "rapide_git_commit.h"  // generated at every build by cmake/git_commit.cmake

namespace rapide::cli {

std::string version_text() {
  return fmt::format("rapide {}\ncommit {}\nbuild {}\nkernels {} (cpu: {})\nmpi {}", RAPIDE_VERSION,
                     RAPIDE_GIT_COMMIT, RAPIDE_BUILD_TYPE, isa_level_name(active_isa_level()),
                     cpu_features().describe(), parallel_runtime());
}

std::string version_number() {
  return RAPIDE_VERSION;
}

std::string build_commit() {
  return RAPIDE_GIT_COMMIT;
}

std::string build_type() {
  return RAPIDE_BUILD_TYPE;
}

}  // namespace rapide::cli
