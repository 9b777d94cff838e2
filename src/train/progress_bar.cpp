#include "train/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace rapide::train {

ProgressBar::ProgressBar(std::string label, int64_t first_step, int64_t total_steps, bool enabled)
    : label_(std::move(label)),
      first_step_(first_step),
      total_steps_(total_steps),
      enabled_(enabled),
      terminal_(isatty(fileno(stderr)) != 0) {}

void ProgressBar::update(int64_t step, double loss, float lr, int64_t tokens, double seconds,
                         double held_out_ppl) {
  if (!enabled_) return;
  const int64_t done = step + 1;
  const int tenth = static_cast<int>(done * 10 / total_steps_);
  const bool last = done == total_steps_;
  if (!terminal_ && tenth == last_tenth_ && !last) return;
  last_tenth_ = tenth;
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(done * kWidth / total_steps_);
  const double rate = seconds > 0.0 ? static_cast<double>(tokens) / seconds : 0.0;
  const double per_step = seconds / static_cast<double>(done - first_step_);
  const int eta = static_cast<int>(per_step * static_cast<double>(total_steps_ - done));
  char held_out[48] = "";
  if (held_out_ppl > 0.0)
    std::snprintf(held_out, sizeof(held_out), " held-out ppl %.2f", held_out_ppl);
  std::fprintf(stderr, "%s%s %lld/%lld [%s%s] loss %.4f lr %.2e%s %.0f tok/s ETA %d:%02d%s",
               terminal_ ? "\r" : "", label_.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_steps_), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), loss, lr, held_out, rate, eta / 60,
               eta % 60, terminal_ && !last ? "" : "\n");
  line_open_ = terminal_ && !last;
}

void ProgressBar::note(const std::string& line) {
  std::fprintf(stderr, "%s%s\n", line_open_ ? "\n" : "", line.c_str());
  line_open_ = false;
}

}  // namespace rapide::train
