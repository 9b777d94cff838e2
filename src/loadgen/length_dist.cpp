#include "loadgen/length_dist.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace rapide::loadgen {

namespace {

int parse_int(const std::string& text, const std::string& whole) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 0) {
    fail(ErrorCode::kInvalidArgument,
         "length '{}': expected N, A-B, normal:MEAN:SD or a mixture D@W+D@W", whole);
  }
  return value;
}

}  // namespace

LengthDist LengthDist::parse(const std::string& text) {
  LengthDist dist;
  dist.text_ = text;
  size_t start = 0;
  while (start <= text.size()) {
    size_t plus = text.find('+', start);
    if (plus == std::string::npos) plus = text.size();
    std::string part = text.substr(start, plus - start);
    start = plus + 1;
    Part p{1.0, Shape::kUniform, 0, 0};
    const size_t at = part.find('@');
    if (at != std::string::npos) {
      try {
        p.weight = std::stod(part.substr(at + 1));
      } catch (const std::exception&) {
        p.weight = -1;
      }
      if (!(p.weight > 0)) {
        fail(ErrorCode::kInvalidArgument, "length '{}': weight must be a positive number", text);
      }
      part = part.substr(0, at);
    }
    if (part.rfind("normal:", 0) == 0) {
      const std::string args = part.substr(7);
      const size_t colon = args.find(':');
      if (colon == std::string::npos) {
        fail(ErrorCode::kInvalidArgument, "length '{}': normal needs normal:MEAN:SD", text);
      }
      p.shape = Shape::kNormal;
      p.a = parse_int(args.substr(0, colon), text);
      p.b = parse_int(args.substr(colon + 1), text);
    } else if (const size_t dash = part.find('-'); dash != std::string::npos) {
      p.a = parse_int(part.substr(0, dash), text);
      p.b = parse_int(part.substr(dash + 1), text);
      if (p.b < p.a) fail(ErrorCode::kInvalidArgument, "length '{}': range A-B needs A <= B", text);
    } else {
      p.a = p.b = parse_int(part, text);
    }
    dist.parts_.push_back(p);
    if (plus == text.size()) break;
  }
  return dist;
}

int LengthDist::sample(std::mt19937_64& rng) const {
  if (parts_.empty()) return 1;
  const Part* chosen = &parts_.front();
  if (parts_.size() > 1) {
    std::vector<double> weights;
    for (const Part& p : parts_) weights.push_back(p.weight);
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    chosen = &parts_[pick(rng)];
  }
  if (chosen->shape == Shape::kNormal) {
    std::normal_distribution<double> normal(chosen->a, chosen->b);
    return std::max(1, static_cast<int>(std::lround(normal(rng))));
  }
  if (chosen->a == chosen->b) return chosen->a;
  return std::uniform_int_distribution<int>(chosen->a, chosen->b)(rng);
}

double LengthDist::mean() const {
  double total_weight = 0, sum = 0;
  for (const Part& p : parts_) {
    const double m = p.shape == Shape::kNormal ? p.a : (p.a + p.b) / 2.0;
    sum += p.weight * m;
    total_weight += p.weight;
  }
  return total_weight > 0 ? sum / total_weight : 0.0;
}

int LengthDist::upper() const {
  int most = 0;
  for (const Part& p : parts_)
    most = std::max(most, p.shape == Shape::kNormal ? p.a + 3 * p.b : p.b);
  return most;
}

LengthDist LengthDist::scaled(double factor) const {
  LengthDist out = *this;
  for (Part& p : out.parts_) {
    p.a = std::max(1, static_cast<int>(p.a * factor));
    p.b = std::max(p.shape == Shape::kNormal ? 0 : 1, static_cast<int>(p.b * factor));
  }
  out.text_ = fmt::format("{} x {:.2f}", text_, factor);
  return out;
}

}  // namespace rapide::loadgen
