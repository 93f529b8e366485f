// Tests of the SVG chart writer: nice ticks, well-formed documents, escaping, skipped NaNs.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/svg.h"

namespace sluice::bench {
namespace {

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(BenchSvg, NiceTicksCoverTheRange) {
  auto t = nice_ticks(0, 7.3, 5);
  ASSERT_FALSE(t.empty());
  EXPECT_DOUBLE_EQ(t.front(), 0);
  EXPECT_GE(t.back(), 7.3);
  EXPECT_EQ(t, (std::vector<double>{0, 2, 4, 6, 8}));
  t = nice_ticks(0, 0.37, 4);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 0.1);
  EXPECT_GE(t.back(), 0.37);
  EXPECT_FALSE(nice_ticks(5, 5, 4).empty());  // empty range still gets an axis
  EXPECT_TRUE(nice_ticks(NAN, 1, 4).empty());
}

TEST(BenchSvg, LineChartIsWellFormedAndEscaped) {
  Chart c;
  c.title = "a < b & \"c\"";
  c.x_label = "s";
  c.y_label = "MB/s";
  c.series.push_back({"home <0>", {0, 1, 2, 3}, {10, 20, NAN, 40}});
  c.series.push_back({"total", {0, 3}, {5, 6}});
  c.reference = 30;
  c.reference_label = "goal";
  std::string svg = line_chart_svg(c);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt; b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_NE(svg.find("home &lt;0&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("a < b"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2);
  EXPECT_EQ(count(svg, "<circle"), 5);  // the NaN point is skipped
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find(">goal<"), std::string::npos);
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
}

TEST(BenchSvg, BarChartHasOneBarPerFiniteValue) {
  Chart c;
  c.title = "steady";
  c.categories = {"h1", "h2", "h3"};
  c.series.push_back({"32 tokens", {}, {1.0, 2.0, 3.0}});
  c.series.push_back({"128 tokens", {}, {1.5, NAN, 2.5}});
  std::string svg = bar_chart_svg(c);
  EXPECT_EQ(count(svg, "<rect"), 1 + 5 + 2);  // background, bars, legend swatches
  EXPECT_NE(svg.find(">h2<"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace sluice::bench
