// The training progress line on stderr: step, a bar, loss, learning rate, tokens/s, the last
// held-out perplexity (when there is held-out data) and ETA. On a terminal it redraws one
// line; otherwise (logs, tests) it prints a line at every tenth of the run and at the end.
// Notes (warnings) go on lines of their own.
#pragma once

#include <cstdint>
#include <string>

namespace rapide::train {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t first_step, int64_t total_steps, bool enabled);
  // After step `step` (0-based) is done; tokens counts those trained since the start.
  // held_out_ppl 0: none shown.
  void update(int64_t step, double loss, float lr, int64_t tokens, double seconds,
              double held_out_ppl = 0.0);
  // A line of its own on stderr (printed even when the bar is disabled: warnings must show).
  void note(const std::string& line);

 private:
  std::string label_;
  int64_t first_step_, total_steps_;
  bool enabled_, terminal_;
  int last_tenth_ = -1;
  bool line_open_ = false;  // a terminal line drawn without its newline
};

}  // namespace rapide::train
