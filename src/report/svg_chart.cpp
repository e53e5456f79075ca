#include "nightlora/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace nl {

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(lo / step + 1e-9) * step;
  for (double v = first; v <= hi + step * 0.5 && ticks.size() < 100; v += step)
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  // Cover [lo, hi] completely: the last tick at or above hi.
  if (!ticks.empty() && ticks.back() < hi - step * 1e-9) ticks.push_back(ticks.back() + step);
  return ticks;
}

namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

struct TimeUnit {
  double div;
  const char* name;
};

TimeUnit time_unit_for(double max_s) {
  if (max_s <= 180) return {1, "s"};
  if (max_s <= 3 * 3600) return {60, "min"};
  return {3600, "h"};
}

bool finite_point(const ChartSeries& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

}  // namespace

bool has_points(const LineChart& c) {
  for (const ChartSeries& s : c.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (finite_point(s, i)) return true;
  return false;
}

std::string render_line_chart(const LineChart& c) {
  const double W = c.width;
  const double left = 74, right = 18, bottom = 48;
  const double pw = W - left - right;
  std::ostringstream o;

  // Data ranges.
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  size_t points = 0;
  for (const ChartSeries& s : c.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
      ++points;
    }
  for (const ReferenceLine& r : c.references) {
    if (!points) break;
    y0 = std::min(y0, r.y);
    y1 = std::max(y1, r.y);
  }
  size_t markers = 0;
  for (const XMarker& m : c.markers) {
    if (!std::isfinite(m.x)) continue;
    x0 = std::min(x0, m.x);
    x1 = std::max(x1, m.x);
    ++markers;
  }
  if (points == 0 && markers > 0) y0 = 0, y1 = 1;  // axes for the markers alone

  // Legend: on the title line, right-aligned, when it fits beside the title; otherwise in
  // rows under the title (the plot moves down, the chart grows).
  enum class Swatch { Box, Dashed, Vertical, Cross };
  struct LegendItem {
    std::string label, color;
    Swatch swatch;
    double width;
  };
  std::vector<LegendItem> legend;
  for (const ReferenceLine& r : c.references)
    legend.push_back({r.label, r.color, Swatch::Dashed, 7.0 * static_cast<double>(r.label.size()) + 30});
  for (const ChartSeries& s : c.series) {
    const bool empty = std::none_of(s.y.begin(), s.y.end(), [](double v) { return std::isfinite(v); });
    const std::string label = s.name + (empty ? " (no data)" : "");
    legend.push_back({label, s.color, Swatch::Box, 7.0 * static_cast<double>(label.size()) + 26});
  }
  for (const XMarker& m : c.markers) {
    if (!std::isfinite(m.x) || std::any_of(legend.begin(), legend.end(), [&](const LegendItem& it) {
          return it.swatch >= Swatch::Vertical && it.label == m.kind;
        }))
      continue;
    legend.push_back({m.kind, m.color, m.style == MarkerStyle::Line ? Swatch::Vertical : Swatch::Cross,
                      7.0 * static_cast<double>(m.kind.size()) + 26});
  }
  double legend_w = 0;
  for (const LegendItem& it : legend) legend_w += it.width;
  const double title_w = 8.0 * static_cast<double>(c.title.size()) + 24;
  std::vector<std::pair<double, double>> at;  // (x, baseline y) of each item
  double top = 40;
  if (legend_w <= W - right - left - title_w) {
    double x = W - right - legend_w;
    for (const LegendItem& it : legend) at.push_back({x, 19}), x += it.width;
  } else {
    double x = left, y = 40;
    for (const LegendItem& it : legend) {
      if (x + it.width > W - right && x > left) x = left, y += 18;
      at.push_back({x, y});
      x += it.width;
    }
    top = y + 14;
  }
  const double H = c.height + (top - 40);
  const double ph = H - top - bottom;
  o << "<svg id=\"" << html_escape(c.id) << "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(W)
    << "\" height=\"" << fmt(H) << "\" viewBox=\"0 0 " << fmt(W) << " " << fmt(H) << "\" role=\"img\" aria-label=\""
    << html_escape(c.title) << "\">\n";
  o << "<text x=\"" << fmt(left) << "\" y=\"18\" class=\"title\">" << html_escape(c.title) << "</text>\n";
  for (size_t i = 0; i < legend.size(); ++i) {
    const LegendItem& it = legend[i];
    const double x = at[i].first, y = at[i].second;
    const std::string color = html_escape(it.color);
    switch (it.swatch) {
      case Swatch::Dashed:
        o << "<line x1=\"" << fmt(x) << "\" y1=\"" << fmt(y - 4) << "\" x2=\"" << fmt(x + 16) << "\" y2=\"" << fmt(y - 4)
          << "\" stroke=\"" << color << "\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>";
        break;
      case Swatch::Vertical:
        o << "<line x1=\"" << fmt(x + 7) << "\" y1=\"" << fmt(y - 11) << "\" x2=\"" << fmt(x + 7) << "\" y2=\"" << fmt(y + 2)
          << "\" stroke=\"" << color << "\" stroke-width=\"2\" stroke-dasharray=\"4,2\"/>";
        break;
      case Swatch::Cross:
        o << "<path d=\"M" << fmt(x + 3) << " " << fmt(y - 8) << "L" << fmt(x + 11) << " " << fmt(y) << "M" << fmt(x + 11)
          << " " << fmt(y - 8) << "L" << fmt(x + 3) << " " << fmt(y) << "\" stroke=\"" << color
          << "\" stroke-width=\"2\" fill=\"none\"/>";
        break;
      case Swatch::Box:
        o << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y - 9) << "\" width=\"14\" height=\"10\" fill=\"" << color
          << "\"/>";
        break;
    }
    o << "<text x=\"" << fmt(x + (it.swatch == Swatch::Dashed ? 20 : 18)) << "\" y=\"" << fmt(y) << "\" class=\"legend\">"
      << html_escape(it.label) << "</text>\n";
  }
  o << "<rect x=\"" << fmt(left) << "\" y=\"" << fmt(top) << "\" width=\"" << fmt(pw) << "\" height=\"" << fmt(ph)
    << "\" class=\"plot\"/>\n";
  if (points == 0 && markers == 0) {
    o << "<text x=\"" << fmt(left + pw / 2) << "\" y=\"" << fmt(top + ph / 2) << "\" class=\"nodata\">no data in this run</text>\n";
    o << "</svg>\n";
    return o.str();
  }

  const bool has_bars = std::any_of(c.series.begin(), c.series.end(),
                                    [](const ChartSeries& s) { return s.style == SeriesStyle::Bars; });
  if (c.y_from_zero || has_bars) {
    y0 = std::min(y0, 0.0);
    y1 = std::max(y1, 0.0);
  }
  if (y1 == y0) {
    y1 += y0 == 0 ? 1 : std::fabs(y0) * 0.05;
    y0 -= y0 == 0 ? 0 : std::fabs(y0) * 0.05;
  }
  // A little room above and below the data, then the axis spans whole ticks.
  const double ypad = (y1 - y0) * 0.03;
  if (y0 < 0 || !(c.y_from_zero || has_bars)) y0 -= ypad;
  y1 += ypad;
  const std::vector<double> ytick = nice_ticks(y0, y1, 5);
  if (ytick.size() >= 2) {
    y0 = ytick.front();
    y1 = ytick.back();
  }

  TimeUnit tu = c.x_is_time ? time_unit_for(x1) : TimeUnit{1, ""};
  // Time and steps both count from the start of the run.
  if (c.x_is_time || c.x_whole) x0 = std::min(x0, 0.0);
  if (x1 == x0) x1 = x0 + 1;
  std::vector<double> xt_raw = nice_ticks(x0 / tu.div, x1 / tu.div, 8), xtick;
  for (double v : xt_raw)
    if (v * tu.div >= x0 - 1e-9 && v * tu.div <= x1 + 1e-9 && (!c.x_whole || v == std::round(v))) xtick.push_back(v);

  auto X = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };

  // Grid and tick labels.
  for (double v : ytick) {
    o << "<line x1=\"" << fmt(left) << "\" y1=\"" << fmt(Y(v)) << "\" x2=\"" << fmt(left + pw) << "\" y2=\"" << fmt(Y(v))
      << "\" class=\"grid\"/><text x=\"" << fmt(left - 6) << "\" y=\"" << fmt(Y(v) + 4) << "\" class=\"ytick\">"
      << format_number(v, 4) << "</text>\n";
  }
  for (double v : xtick) {
    const double px = X(v * tu.div);
    o << "<line x1=\"" << fmt(px) << "\" y1=\"" << fmt(top) << "\" x2=\"" << fmt(px) << "\" y2=\"" << fmt(top + ph)
      << "\" class=\"grid\"/><line x1=\"" << fmt(px) << "\" y1=\"" << fmt(top + ph) << "\" x2=\"" << fmt(px) << "\" y2=\""
      << fmt(top + ph + 5) << "\" class=\"axis\"/><text x=\"" << fmt(px) << "\" y=\"" << fmt(top + ph + 18)
      << "\" class=\"xtick\">" << format_number(v, 4) << "</text>\n";
  }
  o << "<line x1=\"" << fmt(left) << "\" y1=\"" << fmt(top + ph) << "\" x2=\"" << fmt(left + pw) << "\" y2=\""
    << fmt(top + ph) << "\" class=\"axis\"/><line x1=\"" << fmt(left) << "\" y1=\"" << fmt(top) << "\" x2=\"" << fmt(left)
    << "\" y2=\"" << fmt(top + ph) << "\" class=\"axis\"/>\n";
  std::string xl = c.x_label;
  if (c.x_is_time) xl += std::string(" (") + tu.name + ")";
  o << "<text x=\"" << fmt(left + pw / 2) << "\" y=\"" << fmt(H - 8) << "\" class=\"xlabel\">" << html_escape(xl)
    << "</text>\n";
  o << "<text transform=\"translate(16," << fmt(top + ph / 2) << ") rotate(-90)\" class=\"ylabel\">"
    << html_escape(c.y_label) << "</text>\n";

  // Series, clipped to the plot area.
  o << "<clipPath id=\"" << html_escape(c.id) << "-clip\"><rect x=\"" << fmt(left) << "\" y=\"" << fmt(top)
    << "\" width=\"" << fmt(pw) << "\" height=\"" << fmt(ph) << "\"/></clipPath>\n<g clip-path=\"url(#"
    << html_escape(c.id) << "-clip)\">\n";
  for (const ChartSeries& s : c.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    bool any = false;
    for (size_t i = 0; i < n && !any; ++i) any = std::isfinite(s.x[i]) && std::isfinite(s.y[i]);
    if (!any) continue;  // listed in the legend as "(no data)"
    if (s.style == SeriesStyle::Bars) {
      // Thin bars; at least one pixel wide, at most a few when points are sparse.
      const double bw = std::clamp(pw / std::max<double>(1.0, static_cast<double>(n)) * 0.6, 1.0, 6.0);
      std::ostringstream d;
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || s.y[i] == 0) continue;
        const double px = X(s.x[i]), py = Y(s.y[i]), pz = Y(0);
        d << "M" << fmt(px - bw / 2) << " " << fmt(pz) << "H" << fmt(px + bw / 2) << "V" << fmt(py) << "H"
          << fmt(px - bw / 2) << "Z";
      }
      o << "<path class=\"series\" data-series=\"" << html_escape(s.name) << "\" d=\"" << d.str() << "\" fill=\""
        << html_escape(s.color) << "\"/>\n";
    } else if (s.style == SeriesStyle::Points || n == 1) {
      std::ostringstream d;
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
        // A small diamond per point: one path instead of thousands of circles.
        const double px = X(s.x[i]), py = Y(s.y[i]);
        d << "M" << fmt(px) << " " << fmt(py - 3.5) << "L" << fmt(px + 3.5) << " " << fmt(py) << "L" << fmt(px) << " "
          << fmt(py + 3.5) << "L" << fmt(px - 3.5) << " " << fmt(py) << "Z";
      }
      o << "<path class=\"series\" data-series=\"" << html_escape(s.name) << "\" d=\"" << d.str() << "\" fill=\""
        << html_escape(s.color) << "\"/>\n";
    } else {
      std::ostringstream d;
      bool pen_down = false;
      double last_x = 0;
      for (size_t i = 0; i < n; ++i) {
        if (!finite_point(s, i)) {
          pen_down = false;  // a gap in the data is a gap in the line
          continue;
        }
        if (pen_down && s.x[i] < last_x) pen_down = false;  // x went back: a new stretch
        d << (pen_down ? "L" : "M") << fmt(X(s.x[i])) << " " << fmt(Y(s.y[i]));
        pen_down = true;
        last_x = s.x[i];
      }
      o << "<path class=\"series\" data-series=\"" << html_escape(s.name) << "\" d=\"" << d.str()
        << "\" fill=\"none\" stroke=\"" << html_escape(s.color) << "\" stroke-width=\"1.8\" stroke-linejoin=\"round\"/>\n";
    }
  }
  for (const ReferenceLine& r : c.references) {
    o << "<line class=\"reference\" x1=\"" << fmt(left) << "\" y1=\"" << fmt(Y(r.y)) << "\" x2=\"" << fmt(left + pw)
      << "\" y2=\"" << fmt(Y(r.y)) << "\" stroke=\"" << html_escape(r.color)
      << "\" stroke-width=\"1.6\" stroke-dasharray=\"6,4\"/>\n";
  }
  o << "</g>\n";

  // Markers, over the series. Line markers label themselves at the top of the plot unless the
  // previous label is too close; every marker says what it is on hover.
  double last_label_end = -1e9;
  for (const XMarker& m : c.markers) {
    if (!std::isfinite(m.x) || m.style != MarkerStyle::Line) continue;
    const double px = X(m.x);
    o << "<line class=\"marker\" data-marker=\"" << html_escape(m.kind) << "\" x1=\"" << fmt(px) << "\" y1=\"" << fmt(top)
      << "\" x2=\"" << fmt(px) << "\" y2=\"" << fmt(top + ph) << "\" stroke=\"" << html_escape(m.color)
      << "\" stroke-width=\"1.6\" stroke-dasharray=\"4,3\"><title>" << html_escape(m.tooltip.empty() ? m.kind : m.tooltip)
      << "</title></line>\n";
    if (!m.label.empty() && px > last_label_end + 4) {
      const bool right_side = px + 6.5 * static_cast<double>(m.label.size()) + 4 <= left + pw;
      o << "<text class=\"mlabel\" x=\"" << fmt(right_side ? px + 3 : px - 3) << "\" y=\"" << fmt(top + 12)
        << "\" fill=\"" << html_escape(m.color) << "\"" << (right_side ? "" : " text-anchor=\"end\"") << ">"
        << html_escape(m.label) << "</text>\n";
      last_label_end = right_side ? px + 6.5 * static_cast<double>(m.label.size()) + 3 : px;
    }
  }
  // Crosses on the x axis, one path per kind (a diverged run may have thousands).
  std::vector<std::string> cross_kinds;
  for (const XMarker& m : c.markers)
    if (std::isfinite(m.x) && m.style == MarkerStyle::Cross &&
        std::find(cross_kinds.begin(), cross_kinds.end(), m.kind) == cross_kinds.end())
      cross_kinds.push_back(m.kind);
  for (const std::string& kind : cross_kinds) {
    std::ostringstream d;
    std::string color, tip;
    size_t n = 0;
    for (const XMarker& m : c.markers) {
      if (!std::isfinite(m.x) || m.style != MarkerStyle::Cross || m.kind != kind) continue;
      const double px = X(m.x), py = top + ph;
      d << "M" << fmt(px - 4) << " " << fmt(py - 4) << "L" << fmt(px + 4) << " " << fmt(py + 4) << "M" << fmt(px + 4) << " "
        << fmt(py - 4) << "L" << fmt(px - 4) << " " << fmt(py + 4);
      color = m.color;
      if (n++ < 20) tip += (tip.empty() ? "" : "\n") + (m.tooltip.empty() ? m.kind : m.tooltip);
    }
    if (n > 20) tip += "\n... and " + std::to_string(n - 20) + " more";
    o << "<path class=\"marker\" data-marker=\"" << html_escape(kind) << "\" d=\"" << d.str() << "\" stroke=\""
      << html_escape(color) << "\" stroke-width=\"2\" fill=\"none\"><title>" << html_escape(tip) << "</title></path>\n";
  }
  if (points == 0)
    o << "<text x=\"" << fmt(left + pw / 2) << "\" y=\"" << fmt(top + ph / 2) << "\" class=\"nodata\">no finite values</text>\n";
  o << "</svg>\n";
  return o.str();
}

std::string render_stacked_bar(const std::string& id, const std::string& title, const std::vector<BarSegment>& segments,
                               const std::string& unit, double width) {
  double total = 0;
  for (const BarSegment& s : segments) total += std::max(0.0, s.value);
  const double left = 10, right = 10, bar_y = 32, bar_h = 30;
  // Three legend columns, or two when a label is long.
  size_t cols = 3;
  for (const BarSegment& s : segments)
    if (s.name.size() > 28) cols = 2;
  const double rows = static_cast<double>((segments.size() + cols - 1) / cols);
  const double H = bar_y + bar_h + 16 + rows * 20 + 6;
  const double pw = width - left - right;
  std::ostringstream o;
  o << "<svg id=\"" << html_escape(id) << "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width)
    << "\" height=\"" << fmt(H) << "\" viewBox=\"0 0 " << fmt(width) << " " << fmt(H) << "\" role=\"img\" aria-label=\""
    << html_escape(title) << "\">\n";
  o << "<text x=\"" << fmt(left) << "\" y=\"18\" class=\"title\">" << html_escape(title) << "</text>\n";
  if (!(total > 0)) {
    o << "<rect x=\"" << fmt(left) << "\" y=\"" << fmt(bar_y) << "\" width=\"" << fmt(pw) << "\" height=\"" << fmt(bar_h)
      << "\" class=\"plot\"/><text x=\"" << fmt(left + pw / 2) << "\" y=\"" << fmt(bar_y + 20)
      << "\" class=\"nodata\">no data in this run</text>\n</svg>\n";
    return o.str();
  }
  double x = left;
  for (const BarSegment& s : segments) {
    const double w = std::max(0.0, s.value) / total * pw;
    if (w <= 0) continue;
    o << "<path class=\"series\" data-series=\"" << html_escape(s.name) << "\" d=\"M" << fmt(x) << " " << fmt(bar_y) << "H"
      << fmt(x + w) << "V" << fmt(bar_y + bar_h) << "H" << fmt(x) << "Z\" fill=\"" << html_escape(s.color)
      << "\"><title>" << html_escape(s.name) << "</title></path>\n";
    x += w;
  }
  // Legend: columns of "name: value (share)".
  const double col_w = pw / static_cast<double>(cols);
  for (size_t i = 0; i < segments.size(); ++i) {
    const BarSegment& s = segments[i];
    const double lx = left + static_cast<double>(i % cols) * col_w,
                 ly = bar_y + bar_h + 18 + static_cast<double>(i / cols) * 20;
    // The bar shows shares to 0.01 % of the total: a value below that is rounding noise.
    const double resolution = total * 1e-4;
    const std::string value = unit == "s" ? format_seconds(s.value, resolution)
                                          : format_number(s.value, 4, resolution) + " " + unit;
    const std::string share = format_share(s.value, total);
    o << "<rect x=\"" << fmt(lx) << "\" y=\"" << fmt(ly - 10) << "\" width=\"12\" height=\"12\" fill=\""
      << html_escape(s.color) << "\"/><text x=\"" << fmt(lx + 17) << "\" y=\"" << fmt(ly) << "\" class=\"legend\">"
      << html_escape(s.name) << ": " << html_escape(value) << " (" << share << ")</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace nl
