#include "loadgen/arrival.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>

#include "base/error.h"

namespace rapide::loadgen {

std::string ArrivalPattern::label() const {
  if (!open_loop()) return fmt::format("concurrency={}", concurrency);
  std::string text = std::isinf(rate) ? "rate=inf" : fmt::format("rate={:g}/s", rate);
  if (burstiness != 1.0) text += fmt::format(" burst={:g}", burstiness);
  if (concurrency > 0) text += fmt::format(" max-conc={}", concurrency);
  return text;
}

std::vector<double> arrival_offsets(const ArrivalPattern& pattern, size_t count) {
  std::vector<double> offsets(count, 0.0);
  if (!pattern.open_loop() || std::isinf(pattern.rate)) return offsets;
  // Gamma(shape k, scale 1/(rate k)) keeps the mean gap at 1/rate for every burstiness;
  // k = 1 is the exponential distribution, i.e. a Poisson process.
  const double shape = pattern.burstiness;
  std::gamma_distribution<double> gap(shape, 1.0 / (pattern.rate * shape));
  std::mt19937_64 rng(pattern.seed);
  double t = 0;
  for (size_t i = 0; i < count; ++i) {
    offsets[i] = t;
    t += gap(rng);
  }
  return offsets;
}

std::vector<double> parse_rates(const std::string& text) {
  std::vector<double> rates;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(start, comma - start);
    start = comma + 1;
    if (part == "inf") {
      rates.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    char* end = nullptr;
    const double rate = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !(rate > 0)) {
      fail(ErrorCode::kInvalidArgument, "--rates: '{}' is not a positive rate (or inf)", part);
    }
    rates.push_back(rate);
  }
  if (rates.empty()) fail(ErrorCode::kInvalidArgument, "--rates: no rate given");
  return rates;
}

}  // namespace rapide::loadgen
