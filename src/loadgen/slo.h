// Service-level objectives and goodput: the requests a user would call "fast enough".
//
// Throughput alone rewards a server that answers everything slowly; goodput counts only the
// requests that met every given bound, which is the figure to maximize when choosing levers.
#pragma once

#include <string>

#include "loadgen/request_record.h"

namespace rapide::loadgen {

struct Slo {
  // Bounds in seconds; a negative bound is not set.
  double ttft = -1.0;
  double tpot = -1.0;
  double e2e = -1.0;

  bool empty() const { return ttft < 0 && tpot < 0 && e2e < 0; }
  // "ttft=500ms,tpot=50ms" form, the same as parse_slo accepts; "" when empty.
  std::string to_string() const;
};

// Parses "ttft=500ms,tpot=50ms,e2e=10s" (units: us, ms, s; a bare number is milliseconds).
// Throws Error(kInvalidArgument) naming the bad part.
Slo parse_slo(const std::string& text);

// A completed request meets the SLO when each set bound holds. A request with a single output
// token has no TPOT and passes that bound; failed requests never meet it.
bool meets_slo(const RequestRecord& record, const Slo& slo);

}  // namespace rapide::loadgen
