// Charts as inline SVG text, for reports that must open anywhere without network or scripts:
// line/point/bar series over a shared x axis with ticks, labels, a legend and horizontal
// reference lines (e.g. a temperature ceiling), and a horizontal stacked bar for shares.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace nl {

enum class SeriesStyle { Line, Points, Bars };

struct ChartSeries {
  std::string name;
  std::string color;  // CSS colour
  SeriesStyle style = SeriesStyle::Line;
  std::vector<double> x, y;
};

struct ReferenceLine {
  double y = 0;
  std::string label;
  std::string color = "#c0392b";
};

struct LineChart {
  std::string id;       // the <svg> id (for tests and links)
  std::string title;
  std::string x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<ReferenceLine> references;
  bool y_from_zero = false;  // include 0 in the y range
  // x values are seconds: ticks are labelled in s, min or h, whichever suits the range.
  bool x_is_time = false;
  double width = 1040, height = 250;
};

// The <svg> element. Series with no points are left out of the plot but listed in the
// legend as "(no data)"; a chart with no points at all says so in its middle.
std::string render_line_chart(const LineChart& chart);

struct BarSegment {
  std::string name;
  std::string color;
  double value = 0;
};

// One horizontal bar split into segments proportional to their values, with a legend giving
// each segment's value (formatted by `unit`: "s" for seconds, "%" ...) and share.
std::string render_stacked_bar(const std::string& id, const std::string& title, const std::vector<BarSegment>& segments,
                               const std::string& unit, double width = 1040);

// About `target` evenly spaced round values (1, 2, 2.5 or 5 times a power of ten) covering
// [lo, hi]. Exposed for tests.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

// Escapes &, <, >, " and ' for HTML/SVG text and attributes.
std::string html_escape(const std::string& s);

// A number with about `digits` significant digits, without trailing zeros: 0.125, 1.5e+06.
std::string format_number(double v, int digits = 4);

// Seconds as "42 s", "12.5 min", "3.2 h".
std::string format_seconds(double s);

}  // namespace nl
