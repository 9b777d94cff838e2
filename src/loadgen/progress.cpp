#include "loadgen/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "loadgen/table_report.h"

namespace rapide::loadgen {

namespace {
constexpr double kPlainInterval = 5.0;  // seconds between lines when not on a terminal
}

std::string format_progress(const Progress& p) {
  const double rate = p.elapsed > 0 ? static_cast<double>(p.done) / p.elapsed : 0.0;
  return fmt::format(
      "[{}] {}/{} done, {} failed, {} in flight, {:.2f} req/s, TTFT p50 {} ms, "
      "TPOT p50 {} ms, {:.1f} s",
      p.label, p.done, p.total, p.failed, p.in_flight, rate, format_ms(p.ttft_p50),
      format_ms(p.tpot_p50), p.elapsed);
}

ProgressPrinter::ProgressPrinter() : tty_(isatty(STDERR_FILENO) == 1) {}

void ProgressPrinter::operator()(const Progress& p) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", format_progress(p).c_str(), p.final ? "\n" : "");
  } else if (p.final || p.elapsed - last_printed_ >= kPlainInterval) {
    std::fprintf(stderr, "%s\n", format_progress(p).c_str());
    last_printed_ = p.elapsed;
  }
  std::fflush(stderr);
}

}  // namespace rapide::loadgen
