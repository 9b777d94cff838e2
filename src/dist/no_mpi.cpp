// join_parallel_job in a build without MPI (RAPIDE_MPI off).
#include "base/error.h"
#include "dist/parallel_job.h"

namespace rapide {

std::unique_ptr<ParallelJob> join_parallel_job(int tp, int pp, int) {
  fail(ErrorCode::kUnsupported,
       "--tp {} --pp {}: this rapide was built without MPI (install libopenmpi-dev and rebuild "
       "with -DRAPIDE_MPI=ON)",
       tp, pp);
}

int parallel_job_rank() {
  return 0;
}

int parallel_job_size() {
  return 1;
}

}  // namespace rapide
