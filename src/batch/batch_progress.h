// Progress of a batch on stderr: a redrawn bar with done/total, tok/s and ETA when stderr is
// a terminal, plain periodic lines otherwise (logs, CI, nohup).
#pragma once

#include <cstdint>
#include <cstdio>

#include "base/clock.h"

namespace rapide::batch {

struct ProgressCounts {
  uint64_t done = 0;              // input lines answered, earlier runs included
  uint64_t errors = 0;            // of those, in the errors file
  uint64_t prompt_tokens = 0;     // this run
  uint64_t generated_tokens = 0;  // this run
  uint64_t cached_tokens = 0;     // this run: prompt tokens served by the prefix cache
};

class BatchProgress {
 public:
  // `total` input lines, `resumed` of them answered before this run. `interval_s` is the
  // period of plain lines (the bar redraws a few times a second).
  BatchProgress(uint64_t total, uint64_t resumed, bool tty, double interval_s,
                std::FILE* out = stderr);

  // Redraws or prints if it is time to.
  void update(const ProgressCounts& counts);
  // The final line (always printed).
  void finish(const ProgressCounts& counts);

  // Whether stderr is a terminal.
  static bool stderr_is_tty();

 private:
  void print(const ProgressCounts& counts, bool final);

  uint64_t total_;
  uint64_t resumed_;
  bool tty_;
  double interval_s_;
  std::FILE* out_;
  TimePoint start_;
  TimePoint last_print_;
};

}  // namespace rapide::batch
