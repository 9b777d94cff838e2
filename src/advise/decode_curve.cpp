#include "advise/decode_curve.h"

#include <algorithm>

namespace rapide::advise {

double DecodeCurve::at(double rows) const {
  if (points.empty()) return 0.0;
  if (points.size() == 1) return points.front().seconds;
  // The segment holding `rows`, or the first / last one outside the measured range.
  size_t i = 1;
  while (i + 1 < points.size() && rows > points[i].rows) ++i;
  const DecodeCurvePoint& a = points[i - 1];
  const DecodeCurvePoint& b = points[i];
  const double slope = (b.seconds - a.seconds) / static_cast<double>(b.rows - a.rows);
  const double value = a.seconds + slope * (rows - a.rows);
  // Timing noise can make a segment fall; more rows never cost less than the first point.
  return rows >= points.front().rows ? std::max(value, points.front().seconds) : value;
}

double DecodeCurve::ratio(double from, double to) const {
  if (empty()) return 1.0;
  const double base = at(from);
  return base > 0 ? at(to) / base : 1.0;
}

}  // namespace rapide::advise
