// Charts as inline SVG text, for reports that must open anywhere without network or scripts:
// line/point/bar series over a shared x axis with ticks, labels, a legend, horizontal
// reference lines (e.g. a temperature ceiling) and markers at points of the x axis (events
// of a run: a resume, a rollback, a skipped step), and a horizontal stacked bar for shares.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nightlora/report/number_format.h"

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

// Something that happened at one x: a dashed vertical line across the plot with a short label
// at its top (`Line`), or a cross on the x axis (`Cross`: many of them stay readable, e.g. every
// step whose value was not finite). Markers of the same `kind` share one legend entry.
enum class MarkerStyle { Line, Cross };

struct XMarker {
  double x = 0;
  std::string kind;     // the legend entry, e.g. "rollback"
  std::string color;
  MarkerStyle style = MarkerStyle::Line;
  std::string label;    // short text beside a Line marker ("to step 40"); may be empty
  std::string tooltip;  // shown on hover (an SVG <title>)
};

struct LineChart {
  std::string id;       // the <svg> id (for tests and links)
  std::string title;
  std::string x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<ReferenceLine> references;
  std::vector<XMarker> markers;  // they widen the x range to include them
  bool y_from_zero = false;  // include 0 in the y range
  // x values are seconds: ticks are labelled in s, min or h, whichever suits the range.
  bool x_is_time = false;
  // x values are whole numbers (steps): only whole ticks are labelled.
  bool x_whole = false;
  double width = 1040, height = 250;
};

// True when some series has a point with finite x and y.
bool has_points(const LineChart& chart);

// The <svg> element. Series with no points are left out of the plot but listed in the
// legend as "(no data)"; a chart with no points at all says so in its middle (with markers,
// its axes and markers are still drawn). A line series is broken where a value is not finite
// and where x goes back (a step redone after a rollback or a resume).
std::string render_line_chart(const LineChart& chart);

struct BarSegment {
  std::string name;
  std::string color;
  double value = 0;
};

// One horizontal bar split into segments proportional to their values, with a legend giving
// each segment's value (formatted by `unit`: "s" for seconds, "%" ...) and share. Values are
// shown at the precision the total sets: one too small to see beside the total prints as 0.
std::string render_stacked_bar(const std::string& id, const std::string& title, const std::vector<BarSegment>& segments,
                               const std::string& unit, double width = 1040);

// About `target` evenly spaced round values (1, 2, 2.5 or 5 times a power of ten) covering
// [lo, hi]. Exposed for tests.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

// Escapes &, <, >, " and ' for HTML/SVG text and attributes.
std::string html_escape(const std::string& s);

}  // namespace nl
