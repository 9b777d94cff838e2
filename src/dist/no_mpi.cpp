// join_tensor_parallel in a build without MPI (RAPIDE_MPI off).
#include "base/error.h"
#include "dist/tensor_parallel_job.h"

namespace rapide {

std::unique_ptr<TensorParallelJob> join_tensor_parallel(int size) {
  fail(ErrorCode::kUnsupported,
       "--tp {}: this rapide was built without MPI (install libopenmpi-dev and rebuild with "
       "-DRAPIDE_MPI=ON)",
       size);
}

}  // namespace rapide
