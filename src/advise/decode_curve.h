// The decode step's cost as its rows grow, measured (advise/decode_row_sweep.h) rather than
// extrapolated: a lever that lets more sequences decode together (the paged layout, smaller
// pages, a higher --max-seqs) is predicted by what a step of that many rows costs.
//
// Why measured: a straight line fitted on the few row counts a run saw does not hold far
// beyond them. On synth100m Q8_0 (2 threads) a step cost 2.27 ms at 4 rows and 6.09 ms at
// 15.6, 0.30 ms a row, more than a prompt token: each row's attention reads its own KV, and
// the weights stop being the only traffic. A line through 1-4 rows predicted 1830 tok/s where
// 1285 was measured (issue 50).
//
// Plain data, carried in the engine state (advise/engine_state.h) so a state file keeps it.
#pragma once

#include <vector>

namespace rapide::advise {

struct DecodeCurvePoint {
  int rows = 0;
  double seconds = 0.0;  // one decode step, the median of the steps timed
};

struct DecodeCurve {
  int context = 0;                       // positions of KV each row attends to while timed
  std::vector<DecodeCurvePoint> points;  // rows ascending, distinct

  bool empty() const { return points.size() < 2; }
  // The step at `rows`: linear between the measured points, along the nearest segment
  // outside them (never below the smallest point's cost for rows at or above it).
  double at(double rows) const;
  // How much more a step of `to` rows costs than one of `from` rows: the factor a measured
  // step time is scaled by. 1 when the curve is empty.
  double ratio(double from, double to) const;
};

}  // namespace rapide::advise
