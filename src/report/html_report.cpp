#include "nightlora/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <set>
#include <sstream>

#include "nightlora/job/atomic_file.h"
#include "nightlora/report/number_format.h"
#include "nightlora/report/run_events.h"
#include "nightlora/report/svg_chart.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

namespace fs = std::filesystem;

// A palette that stays apart for colour-blind readers (Okabe-Ito), for series and segments.
const char* kColors[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

const char* kCss = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d2330;
       background: #f6f7f9; margin: 0; }
main { max-width: 1080px; margin: 0 auto; padding: 20px 20px 40px; }
h1 { font-size: 22px; margin: 4px 0 2px; }
h2 { font-size: 16px; margin: 26px 0 8px; border-bottom: 1px solid #d8dce3; padding-bottom: 4px; }
.sub { color: #5b6475; margin: 0 0 14px; }
.card { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 10px 12px; margin: 10px 0; }
table.summary { border-collapse: collapse; width: 100%; }
table.summary th { text-align: left; font-weight: 600; color: #3b4252; width: 190px; vertical-align: top;
                   padding: 4px 10px 4px 0; }
table.summary td { padding: 4px 0; vertical-align: top; }
table.summary tr + tr th, table.summary tr + tr td { border-top: 1px solid #eef0f3; }
.muted { color: #6b7385; }
.warn { background: #fff4d6; border: 1px solid #e6c35c; border-radius: 6px; padding: 8px 12px; margin: 10px 0; }
.note { color: #5b6475; font-size: 13px; margin: 2px 0 0; }
code { font: 12.5px ui-monospace, "DejaVu Sans Mono", monospace; background: #f0f2f5; padding: 1px 4px; border-radius: 3px; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg .title { font-weight: 600; font-size: 14px; fill: #1d2330; }
svg .legend { font-size: 12px; fill: #3b4252; }
svg .plot { fill: #fcfcfd; stroke: #d8dce3; }
svg .grid { stroke: #e8ebf0; stroke-width: 1; }
svg .axis { stroke: #7a8294; stroke-width: 1; }
svg .xtick { font-size: 11px; fill: #4c5567; text-anchor: middle; }
svg .ytick { font-size: 11px; fill: #4c5567; text-anchor: end; }
svg .xlabel, svg .ylabel { font-size: 12px; fill: #3b4252; text-anchor: middle; }
svg .nodata { font-size: 14px; fill: #8a93a5; text-anchor: middle; }
svg .mlabel { font-size: 11px; }
p.empty-panel { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 6px 12px; margin: 10px 0;
                color: #5b6475; }
table.events { border-collapse: collapse; width: 100%; }
table.events th { text-align: left; font-weight: 600; color: #3b4252; padding: 3px 10px 3px 0;
                  border-bottom: 1px solid #d8dce3; }
table.events td { padding: 3px 10px 3px 0; vertical-align: top; border-top: 1px solid #eef0f3; }
table.events td.num { white-space: nowrap; }
)";

std::string esc(const std::string& s) { return html_escape(s); }

std::string str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string count(int64_t n) {
  // 1234567 -> "1 234 567": large token counts stay readable.
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += "\u202f";
    out += s[i];
  }
  return out;
}

struct Table {
  std::ostringstream o;
  Table() { o << "<table class=\"summary\">\n"; }
  void row(const std::string& k, const std::string& html) { o << "<tr><th>" << esc(k) << "</th><td>" << html << "</td></tr>\n"; }
  std::string done() {
    o << "</table>\n";
    return o.str();
  }
};

std::string chart_card(const std::string& svg, const std::string& note = "") {
  return "<div class=\"card\">\n" + svg + (note.empty() ? "" : "<p class=\"note\">" + note + "</p>\n") + "</div>\n";
}

// Field names as the trainer writes them ("frozen_forward_s", "peak_rss_mib") made readable:
// the unit suffix goes (the axis says it), underscores become spaces.
std::string part_label(std::string key) {
  for (const char* unit : {"_s", "_mib", "_bytes"}) {
    const size_t n = std::char_traits<char>::length(unit);
    if (key.size() > n && key.compare(key.size() - n, n, unit) == 0) {
      key.resize(key.size() - n);
      break;
    }
  }
  std::replace(key.begin(), key.end(), '_', ' ');
  return key;
}

// Every time-series chart of the report plots something against the run's wall time or its
// steps (--x), with the run's events marked on it.
struct ChartMaker {
  const RunLog& run;
  XAxis axis;

  LineChart chart(const std::string& id, const std::string& title, const std::string& y_label,
                  bool y_from_zero = false) const {
    LineChart c;
    c.id = id;
    c.title = title;
    c.x_label = axis == XAxis::Steps ? "step" : "wall time";
    c.x_is_time = axis == XAxis::Time;
    c.x_whole = axis == XAxis::Steps;
    c.y_label = y_label;
    c.y_from_zero = y_from_zero;
    c.markers = event_markers(run, axis);
    return c;
  }

  // A series of value(row) at the row's x, for each row.
  template <class Rows, class Value>
  ChartSeries series(const std::string& name, const std::string& color, SeriesStyle style, const Rows& rows,
                     Value value) const {
    ChartSeries s{name, color, style, {}, {}};
    for (const auto& r : rows) s.x.push_back(x_of(r, axis)), s.y.push_back(value(r));
    return s;
  }
};

// A chart, or when it has nothing to draw, one line saying why (no empty box).
std::string panel(const LineChart& c, const std::string& note, const std::string& empty_note) {
  if (!has_points(c))
    return "<p class=\"empty-panel\" id=\"" + esc(c.id) + "-none\"><b>" + esc(c.title) + ":</b> " + empty_note + "</p>\n";
  return chart_card(render_line_chart(c), note);
}

// A training figure of a step of the run's history: a skipped step's was refused (a gap, and
// a cross on the axis), and steps redone later (rollback, resume) are not part of it.
double applied_value(const TrainRow& r, double v) { return r.skipped || r.superseded ? NAN : v; }

// "2.31 (step 57; the last 3 steps were non-finite or skipped" (the caller closes the brackets).
std::string last_finite_text(const LastFinite& f, const std::string& row) {
  std::string s = format_number(f.value, 5) + " <span class=\"muted\">(step " + std::to_string(f.step);
  if (f.not_finite_after == 1) s += "; <b>the last " + row + " was non-finite or skipped</b>";
  if (f.not_finite_after > 1)
    s += "; <b>the last " + std::to_string(f.not_finite_after) + " " + row + "s were non-finite or skipped</b>";
  return s;
}

}  // namespace

std::string render_report_html(const RunLog& run, const ReportOptions& opt) {
  const ChartMaker mk{run, opt.x};
  const nlohmann::json& rec = run.record.is_object() ? run.record : nlohmann::json::object();
  const std::vector<TrainRow>& tr = run.train;
  // The rows of the run's history line. Over steps, without the steps redone later, so the
  // line joins the step before a rollback to the first step redone; over time, all of them
  // (the abandoned stretch a gap, drawn apart), so no line crosses the time they took.
  std::vector<TrainRow> history;
  std::copy_if(tr.begin(), tr.end(), std::back_inserter(history),
               [&](const TrainRow& r) { return opt.x == XAxis::Time || !r.superseded; });

  // Totals.
  int64_t tokens = 0;
  double active_s = 0, idle_s = 0, extra_s = 0, throttle_s = 0, sim_energy = 0;
  for (const TrainRow& r : tr) tokens += r.tokens, active_s += r.step_s;
  for (const PaceRow& p : run.pace) idle_s += p.idle_s;
  // The simulated device lengthens steps two ways: throttling, and (with a fixed work per
  // step) being slower than this machine. Only the first is the device getting hot.
  for (const SimRow& s : run.sim)
    extra_s += s.extra_s, throttle_s += std::min(s.extra_s, s.throttle_loss_s()), sim_energy += s.energy_j;
  const double wall_s = tr.empty() ? 0 : tr.back().t;
  const int64_t total_steps = rec.contains("total_steps") ? rec["total_steps"].get<int64_t>() : (tr.empty() ? 0 : -1);
  const int64_t last_step = tr.empty() ? 0 : tr.back().step;

  std::string status;
  const nlohmann::json sessions = rec.contains("sessions") && rec["sessions"].is_array() ? rec["sessions"] : nlohmann::json::array();
  if (!sessions.empty()) {
    const nlohmann::json& last = sessions.back();
    status = last.contains("outcome") ? str(last, "outcome")
                                      : "running, or killed (the last session has not recorded an end; a re-run resumes it)";
  } else {
    status = total_steps > 0 && last_step >= total_steps ? "finished" : "unknown (no run.json)";
  }

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>nightlora run: "
    << esc(fs::path(run.dir).filename().string()) << "</title>\n<style>" << kCss << "</style>\n</head>\n<body>\n<main>\n";
  h << "<h1>Training run <code>" << esc(run.dir) << "</code></h1>\n";
  h << "<p class=\"sub\">" << esc(status) << " &middot; step " << last_step;
  if (total_steps > 0) h << " of " << total_steps;
  h << " &middot; " << esc(format_seconds(wall_s)) << " of wall time</p>\n";
  for (const std::string& w : run.warnings) h << "<div class=\"warn\">Warning: " << esc(w) << "</div>\n";

  // Summary table.
  {
    Table t;
    t.row("Status", esc(status));
    std::string steps = count(last_step) + (total_steps > 0 ? " of " + count(total_steps) : "");
    t.row("Steps", steps);
    if (!sessions.empty()) {
      std::ostringstream s;
      s << sessions.size() << " session" << (sessions.size() == 1 ? "" : "s");
      s << "<br><span class=\"muted\">";
      for (size_t i = 0; i < sessions.size(); ++i) {
        const nlohmann::json& x = sessions[i];
        s << (i ? "<br>" : "") << esc(str(x, "started")) << ": from step " << esc(str(x, "from_step"));
        if (x.contains("to_step")) s << " to " << esc(str(x, "to_step"));
        s << ", " << esc(x.contains("outcome") ? str(x, "outcome") : "no recorded end (running or killed)");
      }
      s << "</span>";
      t.row("Sessions", s.str());
    }
    t.row("Tokens", count(tokens) + (active_s > 0 ? " <span class=\"muted\">(" + format_number(tokens / active_s, 4) +
                                                        " tokens/s while computing, " +
                                                        format_number(wall_s > 0 ? tokens / wall_s : 0, 4) +
                                                        " over wall time)</span>"
                                                  : ""));
    std::string wall = esc(format_seconds(wall_s)) + " <span class=\"muted\">(summed over sessions; the time between "
                                                     "sessions is not counted)</span>";
    t.row("Wall time", wall);
    // Run totals are sums over thousands of steps: below a millisecond is rounding noise.
    const double ms = 1e-3;
    std::string act = esc(format_seconds(active_s, ms)) + " computing steps";
    if (!run.sim.empty())
      act += " (of which " + esc(format_seconds(throttle_s, ms)) + " slowed by the simulated device's throttling, " +
             esc(format_seconds(extra_s - throttle_s, ms)) + " waiting for the simulated device, slower than this machine)";
    if (!run.pace.empty()) act += ", " + esc(format_seconds(idle_s, ms)) + " pacing idle";
    if (!run.waits.empty()) act += ", " + std::to_string(run.waits.size()) + " background wait(s)";
    t.row("Active time", act);
    std::string why;
    if (auto e = run.energy_j(&why)) {
      std::string src = rec.contains("energy") ? str(rec["energy"], "source") : "";
      t.row("Energy", format_number(*e, 4) + " J <span class=\"muted\">(" + format_number(*e / 3600.0, 3) + " Wh, measured" +
                          (src.empty() ? "" : ": " + esc(src)) + ")</span>");
    } else {
      t.row("Energy", "unavailable <span class=\"muted\">(" + esc(why) + ")</span>");
    }
    if (!run.sim.empty())
      t.row("Simulated device energy", format_number(sim_energy, 4) +
                                           " J <span class=\"muted\">(the thermal model's, not a measurement)</span>");
    // The last finite losses: a diverged run's NaN is said to be NaN, never shown as a loss.
    if (!tr.empty()) {
      const LastFinite f = last_training_loss(run);
      if (f.found)
        t.row("Final training loss", last_finite_text(f, "step") + "; mean of the last " + std::to_string(f.mean_of) +
                                         " finite steps " + format_number(f.mean, 5) + ")</span>");
      else
        t.row("Final training loss", "<b>none finite</b> <span class=\"muted\">(all " +
                                         std::to_string(f.not_finite_after) + " steps non-finite or skipped)</span>");
    }
    if (!run.val.empty()) {
      const LastFinite f = last_validation_loss(run);
      const auto first = std::find_if(run.val.begin(), run.val.end(), [](const ValRow& v) { return std::isfinite(v.loss); });
      if (f.found)
        t.row("Final validation loss", last_finite_text(f, "validation") + "; first " + format_number(first->loss, 5) +
                                           " at step " + std::to_string(first->step) + ")</span>");
      else
        t.row("Final validation loss", "<b>none finite</b> <span class=\"muted\">(all " +
                                           std::to_string(f.not_finite_after) + " validations non-finite)</span>");
    } else {
      t.row("Final validation loss", "<span class=\"muted\">none (no --valid data)</span>");
    }
    for (const RunEvent& e : run.events)
      if (e.kind == RunEvent::Kind::Diverged || e.kind == RunEvent::Kind::EarlyStop)
        t.row("Ended", std::string(e.kind == RunEvent::Kind::Diverged ? "<b>diverged</b>" : "stopped early") + " at step " +
                           std::to_string(e.step) + (e.reason.empty() ? "" : ": " + esc(e.reason)));
    if (rec.contains("kept_adapter") && rec["kept_adapter"].is_object()) {
      const nlohmann::json& k = rec["kept_adapter"];
      std::string kept = "step " + esc(str(k, "step"));
      if (k.contains("val_loss") && k["val_loss"].is_number())
        kept += ", validation loss " + format_number(k["val_loss"].get<double>(), 5);
      if (k.contains("why")) kept += " <span class=\"muted\">(" + esc(str(k, "why")) + ")</span>";
      t.row("Kept adapter", kept);
    }
    {
      std::string adapter;
      if (rec.contains("adapter")) adapter = "<code>" + esc(str(rec["adapter"], "gguf")) + "</code> (GGUF LoRA), <code>" +
                                             esc(str(rec["adapter"], "peft")) + "</code> (PEFT)";
      else if (fs::exists(fs::path(run.dir) / "adapter.gguf"))
        adapter = "<code>" + esc((fs::path(run.dir) / "adapter.gguf").string()) + "</code>";
      else if (std::any_of(run.events.begin(), run.events.end(),
                           [](const RunEvent& e) { return e.kind == RunEvent::Kind::Diverged; }))
        adapter = "<b>none</b>: the run diverged, and no adapter is written from a diverged run";
      else
        adapter = "<span class=\"muted\">not written yet (the run has not finished)</span>";
      t.row("Adapter", adapter);
    }
    if (rec.contains("model"))
      t.row("Model", "<code>" + esc(str(rec, "model")) + "</code>" +
                         (rec.contains("arch") ? " <span class=\"muted\">(" + esc(str(rec, "arch")) + ")</span>" : ""));
    if (rec.contains("data"))
      t.row("Data", "<code>" + esc(str(rec, "data")) + "</code>" +
                        (rec.contains("valid") ? ", validation <code>" + esc(str(rec, "valid")) + "</code>" : ""));
    if (rec.contains("config") && rec["config"].is_object()) {
      std::ostringstream c;
      bool first = true;
      for (auto it = rec["config"].begin(); it != rec["config"].end(); ++it) {
        std::string v = it->is_string() ? it->get<std::string>()
                        : it->is_number_float() ? format_number(it->get<double>(), 6)
                                                : it->dump();
        if (v.empty()) continue;
        if (it.key() == "adapter") v = "(continued from an adapter)";
        c << (first ? "" : " ") << "<code>--" << esc(it.key()) << " " << esc(v) << "</code>";
        first = false;
      }
      t.row("Configuration", c.str());
    }
    if (rec.contains("thermal")) {
      std::string th = esc(str(rec["thermal"], "source"));
      if (rec["thermal"].contains("ceiling_c")) th += "; ceiling " + esc(str(rec["thermal"], "ceiling_c")) + " &deg;C";
      if (rec["thermal"].contains("duty")) th += "; duty " + esc(str(rec["thermal"], "duty"));
      t.row("Temperature source", th);
    }
    if (rec.contains("background")) {
      std::ostringstream b;
      for (auto it = rec["background"].begin(); it != rec["background"].end(); ++it)
        b << "<code>" << esc(it.key()) << " " << esc(it->is_string() ? it->get<std::string>() : it->dump()) << "</code> ";
      t.row("Background conditions", b.str().empty() ? "none" : b.str());
    }
    h << "<h2>Summary</h2>\n<div class=\"card\">\n" << t.done() << "</div>\n";
  }

  // Events.
  {
    const std::vector<EventRow> events = event_rows(run);
    h << "<h2>Events</h2>\n<div class=\"card\">\n";
    if (events.empty()) {
      h << "<p class=\"note\" id=\"events-none\">None: no resume, no skipped or non-finite step, no rollback, and the "
           "run did not stop early or diverge.</p>\n";
    } else {
      h << "<table class=\"events\" id=\"events\">\n<tr><th>step</th><th>wall time</th><th>what</th><th>reason</th></tr>\n";
      for (const EventRow& e : events)
        h << "<tr><td class=\"num\">" << e.steps() << "</td><td class=\"num\">" << esc(format_seconds(e.t, 1e-3)) << "</td><td>" << esc(e.what) << "</td><td>"
          << esc(e.reason) << "</td></tr>\n";
      h << "</table>\n";
    }
    h << "</div>\n";
  }
  // Loss: the run's history as a line; steps it abandoned (rolled back, or redone after a
  // resume) faded; non-finite and skipped steps as gaps with a cross on the x axis.
  {
    LineChart c = mk.chart("chart-loss", "Loss", "mean NLL per supervised token");
    c.series = {mk.series("training loss", kColors[0], SeriesStyle::Line, history,
                          [](const TrainRow& r) { return applied_value(r, r.loss); }),
                mk.series("validation loss", kColors[3], SeriesStyle::Points, run.val,
                          [](const ValRow& r) { return r.loss; })};
    if (std::any_of(tr.begin(), tr.end(), [](const TrainRow& r) { return r.superseded; }))
      c.series.push_back(mk.series("abandoned steps (rolled back or redone)", "#b8bfcc", SeriesStyle::Line, tr,
                                   [](const TrainRow& r) { return r.superseded && !r.skipped ? r.loss : NAN; }));
    for (XMarker& m : non_finite_markers(run, opt.x, [](const TrainRow& r) { return r.loss; }, "training loss"))
      c.markers.push_back(std::move(m));
    for (const ValRow& v : run.val)
      if (!std::isfinite(v.loss))
        c.markers.push_back({x_of(v, opt.x), kNonFiniteMarker, "#d62728", MarkerStyle::Cross, "",
                             "step " + std::to_string(v.step) + ": validation loss not finite"});
    h << "<h2>Loss</h2>\n" << chart_card(render_line_chart(c));
  }
  // Learning rate and gradient norm, per step.
  {
    LineChart lr = mk.chart("chart-lr", "Learning rate", "learning rate", true);
    lr.series = {mk.series("learning rate", kColors[2], SeriesStyle::Line, tr,
                           [](const TrainRow& r) { return r.lr; })};  // what every step ran with
    h << "<h2>Learning rate and gradient norm</h2>\n"
      << panel(lr, "", "not in this run's log (written by trainers since the learning rate was logged per step).");
    LineChart g = mk.chart("chart-gradnorm", "Gradient norm (before clipping)", "global L2 norm", true);
    g.series = {mk.series("gradient norm", kColors[4], SeriesStyle::Line, history,
                          [](const TrainRow& r) { return applied_value(r, r.grad_norm); })};
    if (rec.contains("config") && rec["config"].is_object() && rec["config"].contains("clip") &&
        rec["config"]["clip"].is_number() && rec["config"]["clip"].get<double>() > 0)
      g.references.push_back({rec["config"]["clip"].get<double>(), "clipped above", "#7f8c8d"});
    for (XMarker& m : non_finite_markers(run, opt.x, [](const TrainRow& r) { return r.grad_norm; }, "gradient norm"))
      g.markers.push_back(std::move(m));
    h << panel(g, "", "not in this run's log.");
  }
  // Throughput.
  {
    LineChart c = mk.chart("chart-throughput", "Throughput", "tokens/s", true);
    c.series = {mk.series("tokens/s (each step)", kColors[2], SeriesStyle::Line, tr,
                          [](const TrainRow& r) { return r.tokens_per_s; })};
    h << "<h2>Throughput</h2>\n"
      << chart_card(render_line_chart(c), run.sim.empty() ? "" : "Steps slowed by the simulated device's throttling "
                                                                 "include the slowdown (the job really waited it out).");
  }
  // Temperature and pacing.
  {
    LineChart c = mk.chart("chart-temperature", "Temperature", "°C");
    ChartSeries temp{run.sim.empty() ? "temperature after each step" : "simulated device temperature", kColors[3],
                     SeriesStyle::Line, {}, {}};
    ChartSeries hot{"throttled steps", kColors[4], SeriesStyle::Points, {}, {}};  // drawn over the line
    if (!run.sim.empty()) {
      for (const SimRow& s : run.sim) {
        temp.x.push_back(x_of(s, opt.x)), temp.y.push_back(s.temp_c);
        if (s.throttled_s > 0) hot.x.push_back(x_of(s, opt.x)), hot.y.push_back(s.temp_c);
      }
    } else {
      for (const PaceRow& p : run.pace) {
        if (!p.temp_c) continue;
        temp.x.push_back(x_of(p, opt.x)), temp.y.push_back(*p.temp_c);
        if (p.throttled) hot.x.push_back(x_of(p, opt.x)), hot.y.push_back(*p.temp_c);
      }
    }
    c.series = {temp, hot};
    std::string note;
    if (rec.contains("thermal") && rec["thermal"].contains("ceiling_c") && rec["thermal"]["ceiling_c"].is_number())
      c.references.push_back({rec["thermal"]["ceiling_c"].get<double>(), "ceiling", "#c0392b"});
    if (rec.contains("thermal") && rec["thermal"].contains("throttle_at_c") && rec["thermal"]["throttle_at_c"].is_number())
      c.references.push_back({rec["thermal"]["throttle_at_c"].get<double>(), "device throttles", "#7f8c8d"});
    if (temp.x.empty())
      note = "none in this run's log (it is logged with thermal pacing, --temp-ceiling or --duty, or a simulated "
             "device, --temp-source sim).";
    else if (!c.references.empty() && c.references[0].label == "ceiling") {
      const double ceil = c.references[0].y;
      int64_t first_over = -1, over_after = 0;
      double max_after = -1e9;
      for (size_t i = 0; i < temp.y.size(); ++i) {
        if (first_over >= 0) {
          max_after = std::max(max_after, temp.y[i]);
          if (temp.y[i] > ceil) ++over_after;
        } else if (temp.y[i] > ceil) {
          first_over = static_cast<int64_t>(i);
        }
      }
      note = first_over < 0 ? "Never above the ceiling."
                            : "First above the ceiling at the " + std::to_string(first_over + 1) + "th reading; after it " +
                                  std::to_string(over_after) + " reading(s) above it (highest " + format_number(max_after, 4) +
                                  " °C).";
    }
    h << "<h2>Temperature and pacing</h2>\n" << panel(c, esc(note), esc(note));

    LineChart p = mk.chart("chart-idle", "Idle time inserted by pacing, and throttling slowdown", "seconds per step");
    p.series = {mk.series("pacing idle after the step", kColors[0], SeriesStyle::Bars, run.pace,
                          [](const PaceRow& r) { return r.idle_s; })};
    if (!run.sim.empty())
      p.series.push_back(mk.series("time the step lost to throttling", kColors[4], SeriesStyle::Bars, run.sim,
                                   [](const SimRow& r) { return r.throttle_loss_s(); }));
    h << panel(p, "", "none: no pacing in this run (--temp-ceiling or --duty) and no simulated device.");
  }
  // Where the time went.
  {
    h << "<h2>Step time</h2>\n";
    const double other = std::max(0.0, wall_s - active_s - idle_s);
    std::vector<BarSegment> wall = {{"computing steps", kColors[0], active_s - extra_s}};
    if (!run.sim.empty()) {
      wall.push_back({"simulated device slower than this machine", kColors[5], extra_s - throttle_s});
      wall.push_back({"throttling (simulated device)", kColors[4], throttle_s});
    }
    wall.push_back({"pacing idle", kColors[1], idle_s});
    wall.push_back({"other (validation, checkpoints, waits)", "#9aa3b2", other});
    h << chart_card(render_stacked_bar("chart-walltime", "Where the wall time went", wall, "s"));

    // The per-step breakdown the trainer logged, averaged over the steps that have it. Two
    // views when both are logged: the host thread's timeline (its parts add up to the step)
    // and the frozen engine's busy time per product ("frozen_*"), which overlaps the host's.
    std::set<std::string> parts;
    for (const TrainRow& r : tr)
      for (const auto& kv : r.time_parts) parts.insert(kv.first);
    auto mean_of = [&](const std::string& k) {
      double sum = 0;
      int64_t n = 0;
      for (const TrainRow& r : tr)
        if (auto it = r.time_parts.find(k); it != r.time_parts.end()) sum += it->second, ++n;
      return n ? sum / static_cast<double>(n) : 0.0;
    };
    std::vector<BarSegment> host, frozen;
    for (const std::string& k : parts) {
      // Derived figures (overlap, time outside the frozen products) are not parts of either view.
      if (k.find("overlap") != std::string::npos || k.find("outside") != std::string::npos) continue;
      const bool is_frozen = k.find("frozen") != std::string::npos;
      std::vector<BarSegment>& v = is_frozen ? frozen : host;
      v.push_back({part_label(k), kColors[(v.size() + (is_frozen ? 5 : 0)) % 8], mean_of(k)});
    }
    if (parts.empty()) {
      h << chart_card(render_stacked_bar("chart-breakdown", "Inside a step (mean per step)", {}, "s"),
                      "This run's log has no per-step time breakdown (fields such as <code>frozen_forward_s</code>, "
                      "written by trainers that measure them).");
    } else {
      if (!host.empty())
        h << chart_card(render_stacked_bar("chart-breakdown", "Inside a step: the host's timeline (mean per step)", host, "s"));
      if (!frozen.empty())
        h << chart_card(render_stacked_bar(host.empty() ? "chart-breakdown" : "chart-frozen",
                                           "Inside a step: frozen-weight products (engine busy time, mean per step)",
                                           frozen, "s"),
                        host.empty() ? "" : "The engine works while the host does, so these overlap the host's parts.");
    }
    LineChart c = mk.chart("chart-steptime", "Step time", "seconds", true);
    c.series.push_back(mk.series("whole step", "#1d2330", SeriesStyle::Line, tr, [](const TrainRow& r) { return r.step_s; }));
    size_t ci = 0;
    for (const std::string& k : parts) {
      // The host's parts only: with the engine's (overlapping) view the chart is unreadable,
      // and the bars above give it.
      if (k.find("frozen") != std::string::npos || k.find("overlap") != std::string::npos ||
          k.find("outside") != std::string::npos)
        continue;
      c.series.push_back(mk.series(part_label(k), kColors[ci++ % 8], SeriesStyle::Line, tr, [&](const TrainRow& r) {
        auto it = r.time_parts.find(k);
        return it == r.time_parts.end() ? NAN : it->second;
      }));
    }
    h << chart_card(render_line_chart(c));
  }
  // Memory.
  {
    std::set<std::string> keys;
    for (const TrainRow& r : tr)
      for (const auto& kv : r.memory) keys.insert(kv.first);
    LineChart c = mk.chart("chart-memory", "Memory", "MiB", true);
    size_t ci = 0;
    double peak = 0;
    for (const std::string& k : keys) {
      ChartSeries s{part_label(k), kColors[ci++ % 8], SeriesStyle::Line, {}, {}};
      for (const TrainRow& r : tr) {
        auto it = r.memory.find(k);
        s.x.push_back(x_of(r, opt.x));
        s.y.push_back(it == r.memory.end() ? NAN : it->second / (1024.0 * 1024.0));
        if (it != r.memory.end() && k.find("rss") != std::string::npos) peak = std::max(peak, it->second);
      }
      c.series.push_back(s);
    }
    h << "<h2>Memory</h2>\n"
      << panel(c, peak > 0 ? "Highest resident set size logged: " + format_number(peak / (1024.0 * 1024.0), 4) + " MiB." : "",
               "this run's log has no memory figures.");
  }
  if (!run.waits.empty()) {
    h << "<h2>Background waits</h2>\n<div class=\"card\"><table class=\"summary\">\n";
    for (const WaitRow& w : run.waits)
      h << "<tr><th>at step " << w.step << " (" << esc(format_seconds(w.t, 1e-3)) << ")</th><td>" << esc(w.reason)
        << "</td></tr>\n";
    h << "</table></div>\n";
  }
  h << "<p class=\"note\">Made by <code>nightlora report</code> from <code>log.jsonl</code> (" << run.lines
    << " rows) and <code>run.json</code>. Times are wall-clock seconds since the run began, summed over its sessions; "
    << (opt.x == XAxis::Steps ? "the charts' x axis is the training step (<code>--x time</code>: wall time)."
                              : "the charts' x axis is wall time (<code>--x steps</code>: training steps).")
    << "</p>\n";
  h << "</main>\n</body>\n</html>\n";
  return h.str();
}

std::string write_run_report(const std::string& run_dir, const std::string& out_path, const ReportOptions& opt) {
  RunLog run = read_run_log(run_dir);
  const std::string out = out_path.empty() ? (fs::path(run_dir) / "report.html").string() : out_path;
  write_file_atomic(out, render_report_html(run, opt));
  return out;
}

}  // namespace nl
