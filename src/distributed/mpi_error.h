// Turning an MPI return code into rapide's error: the one rule both MPI users (the tensor /
// pipeline job and disaggregation) follow. MPI_COMM_WORLD is set to MPI_ERRORS_RETURN, so a
// failed call (a peer gone, a broken link) comes back here instead of aborting the process,
// and the caller's request or job ends with Error(kUnavailable) naming the call.
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>

#include "base/error.h"

namespace rapide {

// Throws Error(kUnavailable) "<who>: <call> failed: <MPI's text>" unless rc is MPI_SUCCESS.
inline void check_mpi(int rc, std::string_view who, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  fail(ErrorCode::kUnavailable, "{}: {} failed: {}", who, call,
       std::string(text, static_cast<size_t>(length)));
}

}  // namespace rapide
