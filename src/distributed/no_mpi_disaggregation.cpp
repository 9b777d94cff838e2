// The one-process runtime of distributed/disaggregation.h, linked into `rapide` (the binary without
// MPI): prefill ranks are other processes, so --disaggregate and --role are refused with the
// command that runs them in `rapide-mpi` (package rapide-mpi) under mpirun.
#include "base/error.h"
#include "distributed/disaggregation.h"

namespace rapide {

namespace {
[[noreturn]] void refuse() {
  fail(ErrorCode::kUnsupported,
       "--disaggregate: this rapide runs one process; prefill/decode disaggregation runs in "
       "rapide-mpi (package rapide-mpi, or build/apps/rapide/rapide-mpi), one process per rank: "
       "launch the same command as mpirun -np 2 rapide-mpi serve ... --disaggregate");
}
}  // namespace

DisaggRole join_disaggregated_job(const std::string&) {
  refuse();
}

void abort_disaggregated_job(const std::exception&) {
  refuse();
}

std::unique_ptr<RemotePrefill> connect_prefill_ranks() {
  refuse();
}

void serve_prefill_rank(Model&, const EngineOptions&) {
  refuse();
}

}  // namespace rapide
