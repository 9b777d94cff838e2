#include "batch/batch_progress.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace rapide::batch {

namespace {

constexpr double kBarPeriodS = 0.25;
constexpr int kBarWidth = 30;

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "--:--";
  const uint64_t s = static_cast<uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

}  // namespace

BatchProgress::BatchProgress(uint64_t total, uint64_t resumed, bool tty, double interval_s,
                             std::FILE* out)
    : total_(total),
      resumed_(resumed),
      tty_(tty),
      interval_s_(interval_s),
      out_(out),
      start_(Clock::now()),
      last_print_(start_) {}

bool BatchProgress::stderr_is_tty() {
  return ::isatty(STDERR_FILENO) == 1;
}

void BatchProgress::update(const ProgressCounts& counts) {
  const double since = seconds_between(last_print_, Clock::now());
  if (since >= (tty_ ? kBarPeriodS : interval_s_)) print(counts, false);
}

void BatchProgress::finish(const ProgressCounts& counts) {
  print(counts, true);
}

void BatchProgress::print(const ProgressCounts& c, bool final) {
  const TimePoint now = Clock::now();
  last_print_ = now;
  const double elapsed = std::max(seconds_between(start_, now), 1e-9);
  const uint64_t this_run = c.done - std::min(c.done, resumed_);
  const double lines_per_s = this_run / elapsed;
  const double tok_s = c.generated_tokens / elapsed;
  const uint64_t left = total_ - std::min(total_, c.done);
  const double eta = lines_per_s > 0 ? left / lines_per_s : -1.0;
  const double fraction = total_ ? static_cast<double>(c.done) / total_ : 1.0;
  const std::string figures = fmt::format(
      "{}/{} lines ({} errors) | {:.0f} tok/s generated, {:.0f} prompt tok/s ({:.0f}% cached) | "
      "{:.1f} lines/s | elapsed {} | ETA {}",
      c.done, total_, c.errors, tok_s, c.prompt_tokens / elapsed,
      c.prompt_tokens ? 100.0 * c.cached_tokens / c.prompt_tokens : 0.0, lines_per_s,
      format_duration(elapsed), final ? "done" : format_duration(eta));
  if (tty_) {
    const int filled = static_cast<int>(fraction * kBarWidth);
    const std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '.');
    // \x1b[K clears what a longer previous line left behind.
    std::fprintf(out_, "\r[%s] %3.0f%% %s\x1b[K%s", bar.c_str(), fraction * 100.0, figures.c_str(),
                 final ? "\n" : "");
  } else {
    std::fprintf(out_, "batch: %s\n", figures.c_str());
  }
  std::fflush(out_);
}

}  // namespace rapide::batch
