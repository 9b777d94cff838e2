// Token-length distributions for synthetic workloads, written the way users think of them:
//   "200"                     always 200
//   "100-300"                 uniform in [100, 300]
//   "normal:200:50"           normal, mean 200, sd 50 (clamped to >= 1)
//   "10-40@0.8+500-1000@0.2"  a mixture: 80 % short answers, 20 % long ones
#pragma once

#include <random>
#include <string>
#include <vector>

namespace rapide::loadgen {

class LengthDist {
 public:
  LengthDist() = default;
  explicit LengthDist(int fixed) { parts_.push_back({1.0, Shape::kUniform, fixed, fixed}); }
  // Throws Error(kInvalidArgument) for text that is none of the forms above.
  static LengthDist parse(const std::string& text);

  int sample(std::mt19937_64& rng) const;
  double mean() const;
  // The largest length it gives in practice (a normal part counts to mean + 3 sd).
  int upper() const;
  // Every length times `factor` (at least 1), e.g. to fit a small model's context.
  LengthDist scaled(double factor) const;
  const std::string& text() const { return text_; }

 private:
  enum class Shape { kUniform, kNormal };
  struct Part {
    double weight;
    Shape shape;
    int a;  // uniform: low; normal: mean
    int b;  // uniform: high; normal: sd
  };
  std::vector<Part> parts_;
  std::string text_;
};

}  // namespace rapide::loadgen
