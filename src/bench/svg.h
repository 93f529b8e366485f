// Small self-contained SVG charts (line and grouped-bar) for benchmark reports, plus an optional
// PNG copy through rsvg-convert or ImageMagick's convert when either is installed.
#pragma once
#include <string>
#include <vector>

namespace sluice::bench {

struct Series {
  std::string name;
  std::vector<double> x, y;  // line charts use both; bar charts use y (one value per category)
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<std::string> categories;  // bar charts: one group per category
  double reference = 0;                 // > 0: a dashed horizontal line (a goal or a floor)
  std::string reference_label;
  int width = 720, height = 400;
};

// Axis ticks: about `count` "nice" values (1, 2, 5 x 10^k steps) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count);

std::string line_chart_svg(const Chart& c);
std::string bar_chart_svg(const Chart& c);

// Writes `svg` atomically to `path` (.svg); if a converter exists also writes the .png next to it.
// Returns the PNG path, or "" when no converter is installed or it failed.
std::string write_chart(const std::string& path, const std::string& svg);

}  // namespace sluice::bench
