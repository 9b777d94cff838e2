// Small inline-SVG charts for the HTML report: no scripts, no network, readable anywhere a
// browser is (and in an e-mail attachment).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rapide::loadgen {

struct ChartLabels {
  std::string title;
  std::string x;
  std::string y;
};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool lines = false;  // join the points (a sweep curve); else a scatter plot
};

// A histogram of `values` in `bins` equal bins from 0 (latencies start at 0) to the max.
std::string svg_histogram(const std::vector<double>& values, const ChartLabels& labels,
                          int bins = 30);
// Scatter plots and line charts sharing one pair of axes, with a legend for several series.
std::string svg_xy(const std::vector<Series>& series, const ChartLabels& labels);

// Escapes &, <, >, " for HTML and SVG text.
std::string xml_escape(const std::string& text);

}  // namespace rapide::loadgen
