// The one-process runtime of distributed/parallel_job.h, linked into `rapide` (the binary without
// MPI): a job of one rank. --tp / --pp > 1 are refused with the command that runs them, since
// the ranks live in the other binary, `rapide-mpi` (package rapide-mpi), started by mpirun.
#include "base/error.h"
#include "distributed/parallel_job.h"

namespace rapide {

std::unique_ptr<ParallelJob> join_parallel_job(int tp, int pp, int) {
  const char* flag = pp > 1 ? "--pp" : "--tp";
  const int ranks = pp > 1 ? pp : tp;
  fail(ErrorCode::kUnsupported,
       "{} {}: this rapide runs one process; tensor and pipeline parallelism run in rapide-mpi "
       "(package rapide-mpi, or build/apps/rapide/rapide-mpi), one process per rank: launch "
       "the same command as mpirun -np {} rapide-mpi serve ... {} {}",
       flag, ranks, ranks, flag, ranks);
}

int parallel_job_rank() {
  return 0;
}

int parallel_job_size() {
  return 1;
}

std::string parallel_runtime() {
  return "none: one process (--tp, --pp and --disaggregate run in rapide-mpi)";
}

const char* program_name() {
  return "rapide";
}

}  // namespace rapide
