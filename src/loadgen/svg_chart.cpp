#include "loadgen/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace rapide::loadgen {

namespace {

constexpr double kWidth = 520, kHeight = 280;
constexpr double kLeft = 60, kRight = 16, kTop = 28, kBottom = 44;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// A round step (1, 2 or 5 times a power of ten) giving about five ticks over [0, span].
double nice_step(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / power;
  return power * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

std::string number(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 1000) return fmt::format("{:.0f}", v);
  if (std::fabs(v) >= 10) return fmt::format("{:.4g}", v);
  return fmt::format("{:.3g}", v);
}

struct Frame {
  double x_min, x_max, y_min, y_max;
  double px(double x) const {
    return kLeft + (x - x_min) / (x_max - x_min) * (kWidth - kLeft - kRight);
  }
  double py(double y) const {
    return kHeight - kBottom - (y - y_min) / (y_max - y_min) * (kHeight - kTop - kBottom);
  }
};

// Axes with ticks and labels; extends the frame's maxima to the last round tick.
std::string axes(Frame& f, const ChartLabels& labels) {
  const double xs = nice_step(f.x_max - f.x_min), ys = nice_step(f.y_max - f.y_min);
  f.x_max = f.x_min + std::ceil((f.x_max - f.x_min) / xs - 1e-9) * xs;
  f.y_max = f.y_min + std::ceil((f.y_max - f.y_min) / ys - 1e-9) * ys;
  if (f.x_max <= f.x_min) f.x_max = f.x_min + xs;
  if (f.y_max <= f.y_min) f.y_max = f.y_min + ys;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"{}\" y=\"16\" text-anchor=\"middle\" font-size=\"13\" "
      "font-weight=\"bold\">{}</text>\n",
      kWidth, kHeight, kWidth, kHeight, kWidth / 2, xml_escape(labels.title));
  for (double x = f.x_min; x <= f.x_max + xs * 1e-6; x += xs) {
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
        f.px(x), f.py(f.y_min), f.py(f.y_max), f.py(f.y_min) + 14, number(x));
  }
  for (double y = f.y_min; y <= f.y_max + ys * 1e-6; y += ys) {
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        f.px(f.x_min), f.py(y), f.px(f.x_max), f.px(f.x_min) - 4, f.py(y) + 4, number(y));
  }
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>\n",
      (kLeft + kWidth - kRight) / 2, kHeight - 8, xml_escape(labels.x),
      (kTop + kHeight - kBottom) / 2, (kTop + kHeight - kBottom) / 2, xml_escape(labels.y));
  return out;
}

std::string empty_chart(const ChartLabels& labels) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"60\" "
      "font-family=\"sans-serif\" font-size=\"12\"><text x=\"8\" y=\"30\">{1}: no data</text>"
      "</svg>\n",
      kWidth, xml_escape(labels.title));
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg_histogram(const std::vector<double>& values, const ChartLabels& labels, int bins) {
  if (values.empty() || bins < 1) return empty_chart(labels);
  const double max = *std::max_element(values.begin(), values.end());
  const double width = max > 0 ? max / bins : 1.0;
  std::vector<size_t> counts(static_cast<size_t>(bins), 0);
  for (const double v : values) {
    const size_t bin = std::min(static_cast<size_t>(bins - 1), static_cast<size_t>(v / width));
    ++counts[bin];
  }
  Frame f{0, width * bins, 0, static_cast<double>(*std::max_element(counts.begin(), counts.end()))};
  std::string out = axes(f, labels);
  for (int i = 0; i < bins; ++i) {
    if (counts[i] == 0) continue;
    const double x0 = f.px(i * width), x1 = f.px((i + 1) * width);
    const double y = f.py(static_cast<double>(counts[i]));
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
        "<title>{}-{}: {}</title></rect>\n",
        x0, y, std::max(0.5, x1 - x0 - 1), f.py(0) - y, kColors[0], number(i * width),
        number((i + 1) * width), counts[i]);
  }
  return out + "</svg>\n";
}

std::string svg_xy(const std::vector<Series>& series, const ChartLabels& labels) {
  bool any = false;
  Frame f{0, 0, 0, 0};
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      f.x_max = any ? std::max(f.x_max, x) : x;
      f.y_max = any ? std::max(f.y_max, y) : y;
      any = true;
    }
  }
  if (!any) return empty_chart(labels);
  std::string out = axes(f, labels);
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const char* color = kColors[i % std::size(kColors)];
    if (s.lines) {
      std::string path;
      for (const auto& [x, y] : s.points) {
        path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", f.px(x), f.py(y));
      }
      out += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", path,
                         color);
    }
    for (const auto& [x, y] : s.points) {
      out += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" "
          "fill-opacity=\"0.7\"><title>{}, {}</title></circle>\n",
          f.px(x), f.py(y), s.lines ? 3.5 : 2.2, color, number(x), number(y));
    }
    if (series.size() > 1) {
      const double ly = kTop + 4 + 14 * static_cast<double>(i);
      out += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
          "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
          kLeft + 8, ly, color, kLeft + 22, ly + 9, xml_escape(s.name));
    }
  }
  return out + "</svg>\n";
}

}  // namespace rapide::loadgen
