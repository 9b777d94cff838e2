// Where benchmark requests go: an HTTP server or the in-process engine, behind one interface
// so the same workload and arrival pattern can run against both and HTTP overhead shows up
// as the difference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "loadgen/request_record.h"
#include "loadgen/workload.h"

namespace rapide::loadgen {

struct BenchRequest {
  std::vector<ChatMessage> messages;  // the whole conversation so far, ending with the user turn
  int max_tokens = 0;  // forced output length (ignore_eos + min_tokens where supported)
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Called on the runner's io_context thread. Must eventually call `done` exactly once, on
  // that thread, with `record` completed (times relative to `start`).
  virtual void send(const BenchRequest& request, TimePoint start, RequestRecord record,
                    RecordHandler done) = 0;
  // One line for reports: "http://127.0.0.1:8080/v1/completions (model x)".
  virtual std::string describe() const = 0;
};

}  // namespace rapide::loadgen
