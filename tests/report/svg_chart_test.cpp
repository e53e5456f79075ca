// The SVG charts of the report: round ticks that cover the data, escaped text, one path per
// series with the points in it, reference lines, and the "no data" case.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "nightlora/report/svg_chart.h"

namespace {

TEST(SvgChart, NiceTicksAreRoundAndCoverTheRange) {
  auto t = nl::nice_ticks(0.37, 9.2, 5);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 0.37);
  EXPECT_GE(t.back(), 9.2);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 2.0);  // range 8.83 / 5 -> step 2
  for (double v : t) EXPECT_DOUBLE_EQ(v, std::round(v));

  auto small = nl::nice_ticks(2.301, 2.349, 5);
  ASSERT_GE(small.size(), 2u);
  EXPECT_LE(small.front(), 2.301);
  EXPECT_GE(small.back(), 2.349);
  EXPECT_NEAR(small[1] - small[0], 0.01, 1e-12);

  auto flat = nl::nice_ticks(5, 5, 5);  // a constant series still gets an axis
  ASSERT_GE(flat.size(), 2u);
  EXPECT_LT(flat.front(), 5);
  EXPECT_GT(flat.back(), 5);
  EXPECT_TRUE(nl::nice_ticks(NAN, 1).empty());
}

TEST(SvgChart, NumbersAndDurationsAreShort) {
  EXPECT_EQ(nl::format_number(0.125), "0.125");
  EXPECT_EQ(nl::format_number(2.50), "2.5");
  EXPECT_EQ(nl::format_number(1234.5678), "1235");
  EXPECT_EQ(nl::format_number(0), "0");
  EXPECT_EQ(nl::format_seconds(42), "42 s");
  EXPECT_EQ(nl::format_seconds(1500), "25 min");
  EXPECT_EQ(nl::format_seconds(5 * 3600), "5 h");
  EXPECT_EQ(nl::html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(SvgChart, LineChartHasAxesSeriesLegendAndReference) {
  nl::LineChart c;
  c.id = "t1";
  c.title = "Temperature <sim>";
  c.x_label = "wall time";
  c.x_is_time = true;
  c.y_label = "°C";
  nl::ChartSeries s{"temp", "#123456", nl::SeriesStyle::Line, {0, 10, 20, 30}, {40, 50, 55, 54}};
  nl::ChartSeries bars{"idle", "#654321", nl::SeriesStyle::Bars, {10, 20}, {1, 2}};
  c.series = {s, bars, {"empty", "#000", nl::SeriesStyle::Points, {}, {}}};
  c.references = {{56, "ceiling", "#ff0000"}};
  const std::string svg = nl::render_line_chart(c);
  EXPECT_EQ(svg.rfind("<svg id=\"t1\"", 0), 0u);
  EXPECT_NE(svg.find("Temperature &lt;sim&gt;"), std::string::npos);  // escaped
  EXPECT_NE(svg.find("wall time (s)"), std::string::npos);
  EXPECT_NE(svg.find("empty (no data)"), std::string::npos);
  EXPECT_NE(svg.find("class=\"reference\""), std::string::npos);
  // One path per series with data; the line has its 4 points, the bars 2 rectangles.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("data-series=\"temp\" d=\"([^\"]*)\"")));
  const std::string line = m[1].str();
  EXPECT_EQ(std::count(line.begin(), line.end(), 'L'), 3);
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("data-series=\"idle\" d=\"([^\"]*)\"")));
  const std::string bar_path = m[1].str();
  EXPECT_EQ(std::count(bar_path.begin(), bar_path.end(), 'Z'), 2);
  EXPECT_EQ(svg.find("data-series=\"empty\""), std::string::npos);
  // Tick labels: bars put 0 on the y axis, which then runs to 60 (the ceiling at 56 included).
  EXPECT_NE(svg.find(">40<"), std::string::npos);
  EXPECT_NE(svg.find(">60<"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(SvgChart, MarkersAreDrawnAndListedAndALineBreaksWhereXGoesBack) {
  nl::LineChart c;
  c.id = "m";
  c.title = "Loss";
  c.x_whole = true;
  // Steps 1-4, then 3-5 again (a rollback to step 2).
  c.series = {{"loss", "#123456", nl::SeriesStyle::Line, {1, 2, 3, 4, 3, 4, 5}, {3, 2.9, 2.8, 2.75, 2.85, 2.7, 2.6}}};
  c.markers = {{4, "rollback", "#8e44ad", nl::MarkerStyle::Line, "rollback to 2", "step 4 went bad"},
               {4, "non-finite / skipped step", "#d62728", nl::MarkerStyle::Cross, "", "step 4: loss not finite"},
               {7, "diverged", "#c0392b", nl::MarkerStyle::Line, "diverged", ""}};
  const std::string svg = nl::render_line_chart(c);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("data-series=\"loss\" d=\"([^\"]*)\"")));
  const std::string line = m[1].str();
  EXPECT_EQ(std::count(line.begin(), line.end(), 'M'), 2) << line;  // 1-4, then 3-5
  EXPECT_EQ(std::count(line.begin(), line.end(), 'L'), 5) << line;
  // Two line markers with their labels and tooltips, one cross, one legend entry each.
  EXPECT_NE(svg.find("class=\"marker\" data-marker=\"rollback\""), std::string::npos);
  EXPECT_NE(svg.find("<title>step 4 went bad</title>"), std::string::npos);
  EXPECT_NE(svg.find(">rollback to 2<"), std::string::npos);
  EXPECT_NE(svg.find("data-marker=\"non-finite / skipped step\" d=\"M"), std::string::npos);
  EXPECT_NE(svg.find("class=\"legend\">non-finite / skipped step<"), std::string::npos);
  EXPECT_NE(svg.find("class=\"legend\">diverged<"), std::string::npos);
  // The diverged marker at step 7 widens the x axis past the data; ticks are whole steps.
  EXPECT_NE(svg.find("class=\"xtick\">7<"), std::string::npos);
  EXPECT_EQ(svg.find("class=\"xtick\">0.5<"), std::string::npos);

  // A chart whose values are all non-finite still draws its markers, and says why it is empty.
  c.series[0].y.assign(c.series[0].x.size(), NAN);
  const std::string empty = nl::render_line_chart(c);
  EXPECT_FALSE(nl::has_points(c));
  EXPECT_NE(empty.find("no finite values"), std::string::npos);
  EXPECT_NE(empty.find("data-marker=\"rollback\""), std::string::npos);
}

TEST(SvgChart, EmptyChartSaysSoAndStackedBarSplitsByShare) {
  nl::LineChart c;
  c.id = "e";
  c.title = "Memory";
  c.series = {{"rss", "#000", nl::SeriesStyle::Line, {}, {}}};
  const std::string svg = nl::render_line_chart(c);
  EXPECT_NE(svg.find("no data in this run"), std::string::npos);
  EXPECT_EQ(svg.find("class=\"series\""), std::string::npos);

  const std::string bar = nl::render_stacked_bar("b", "Where the time went", {{"steps", "#111", 3}, {"idle", "#222", 1}}, "s");
  EXPECT_NE(bar.find("steps: 3 s (75%)"), std::string::npos) << bar;
  EXPECT_NE(bar.find("idle: 1 s (25%)"), std::string::npos) << bar;
  EXPECT_EQ(std::count(bar.begin(), bar.end(), 'Z'), 2);
  EXPECT_NE(nl::render_stacked_bar("b", "x", {}, "s").find("no data in this run"), std::string::npos);
}

}  // namespace
