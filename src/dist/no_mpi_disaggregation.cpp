// Prefill/decode disaggregation in a build without MPI (RAPIDE_MPI off): refused.
#include "base/error.h"
#include "dist/disaggregation.h"

namespace rapide {

namespace {
[[noreturn]] void refuse() {
  fail(ErrorCode::kUnsupported,
       "--disaggregate: this rapide was built without MPI (install libopenmpi-dev and rebuild "
       "with -DRAPIDE_MPI=ON)");
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
