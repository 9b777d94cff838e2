// The live progress line on stderr: rewritten in place on a terminal, printed every few
// seconds as plain lines when stderr is a file or pipe (CI logs stay readable).
#pragma once

#include <string>

#include "loadgen/runner.h"

namespace rapide::loadgen {

std::string format_progress(const Progress& p);

class ProgressPrinter {
 public:
  ProgressPrinter();
  void operator()(const Progress& p);

 private:
  bool tty_;
  double last_printed_ = -1e9;
};

}  // namespace rapide::loadgen
