// The report tells the truth about runs that went wrong, on hand-written logs: non-finite
// figures are gaps with a cross on the x axis (never 0), the final loss is the last finite one
// with its step, resumes, skipped steps, rollbacks and the end of a diverged or early-stopped
// run are marked on the charts and listed, the learning rate and gradient norm have charts,
// --x steps puts steps on every chart's axis, rounding noise prints as 0, and a panel with
// nothing to draw is one line.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "hand_log.h"
#include "nightlora/report/html_report.h"
#include "nightlora/report/run_events.h"
#include "nightlora/report/run_log.h"

namespace {

using namespace handlog;
const char* kCross = "non-finite / skipped step";

// Steps 1-6 of a run going bad: step 4's loss is null, step 5 has no loss at all, step 6
// (the last) a null loss and gradient norm; the validation at step 4 is null too.
std::vector<json> diverging_rows() {
  return {train(1, 3.0, 1), train(2, 2.8, 2), train(3, 2.6, 3), train(4, nullptr, 4),
          {{"type", "val"}, {"step", 4}, {"val_loss", nullptr}},
          [] { json r = train(5, 2.5, 5); r.erase("loss"); return r; }(),
          train(6, nullptr, 6, nullptr)};
}

TEST(RunEvents, NonFiniteLossesAreGapsWithMarkersAndTheFinalLossIsTheLastFinite) {
  nltest::TempDir td;
  write_log(td, diverging_rows());
  const nl::RunLog run = nl::read_run_log(td.path.string());
  ASSERT_EQ(run.train.size(), 6u);
  EXPECT_TRUE(std::isnan(run.train[3].loss));  // null
  EXPECT_TRUE(std::isnan(run.train[4].loss));  // missing
  EXPECT_TRUE(std::isnan(run.train[5].grad_norm));
  ASSERT_EQ(run.val.size(), 1u);
  EXPECT_TRUE(std::isnan(run.val[0].loss));

  const nl::LastFinite f = nl::last_training_loss(run);
  ASSERT_TRUE(f.found);
  EXPECT_EQ(f.step, 3);
  EXPECT_DOUBLE_EQ(f.value, 2.6);
  EXPECT_EQ(f.not_finite_after, 3);
  EXPECT_DOUBLE_EQ(f.mean, (3.0 + 2.8 + 2.6) / 3);

  const std::string html = nl::render_report_html(run);
  EXPECT_NE(html.find("Final training loss</th><td>2.6 <span class=\"muted\">(step 3; <b>the last 3 steps were "
                      "non-finite or skipped</b>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("Final validation loss</th><td><b>none finite</b>"), std::string::npos);
  EXPECT_EQ(html.find("Final training loss</th><td>0"), std::string::npos);

  // The training loss line: steps 1-3 only (one stretch, no point at 0 or at steps 4-6).
  const std::string loss = svg_of(html, "chart-loss");
  const std::string line = path_of(loss, "training loss");
  EXPECT_EQ(count_of(line, "M"), 1u) << line;
  EXPECT_EQ(count_of(line, "L"), 2u) << line;
  // A cross per non-finite figure on the loss chart: steps 4, 5, 6 and the validation at 4.
  const std::string crosses = path_of(loss, kCross, "data-marker");
  EXPECT_EQ(count_of(crosses, "M"), 2u * 4) << crosses;  // two strokes each
  EXPECT_NE(loss.find(std::string(">") + kCross + "<"), std::string::npos) << "legend entry";
  // The gradient norm: a gap and a cross at step 6.
  const std::string grad = svg_of(html, "chart-gradnorm");
  EXPECT_EQ(count_of(path_of(grad, "gradient norm"), "L"), 4u);
  EXPECT_EQ(count_of(path_of(grad, kCross, "data-marker"), "M"), 2u);

  // The events table lists the bad steps, merged: 4-5 loss not finite, 6 loss and gradient norm.
  EXPECT_NE(html.find("<td class=\"num\">4–5</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("loss not finite (2 steps)"), std::string::npos);
  EXPECT_NE(html.find("loss and gradient norm not finite"), std::string::npos);
  EXPECT_NE(html.find("validation loss not finite"), std::string::npos);
}

// A run with every kind of event: a skipped spike, a rollback that redoes steps 4-5 at half
// the learning rate, a resume, a skipped NaN step and a divergence.
std::vector<json> eventful_rows() {
  return {{{"type", "session"}, {"step", 0}, {"resumed", false}},
          train(1, 3.0, 1), train(2, 2.8, 2), train(3, 2.7, 3), train(4, 2.6, 4),
          skipped(train(5, 9e6, 5, 4e4), "loss spike: 9e6 is 3.5e6 x the running mean"),
          {{"type", "rollback"}, {"step", 5}, {"to_step", 3}, {"lr_scale", 0.5}, {"reason", "loss spike"}},
          train(4, 2.65, 6, 1.0, 5e-4), train(5, 2.5, 7, 1.0, 5e-4),
          {{"type", "session"}, {"step", 5}, {"resumed", true}},
          train(6, 2.4, 9, 1.0, 5e-4),
          skipped(train(7, nullptr, 10, nullptr, 5e-4), "non-finite loss"),
          {{"type", "diverged"}, {"step", 7}, {"reason", "3 rollbacks without recovery"}},
          {{"type", "from_the_future"}, {"step", 7}, {"what", "a row this report does not know"}}};
}

TEST(RunEvents, SessionsRollbacksSkipsAndTheEndAreMarkedAndListed) {
  nltest::TempDir td;
  auto rows = eventful_rows();
  rows[1]["a_field_from_the_future"] = {{"x", 1}};  // unknown fields are ignored
  write_log(td, rows);
  nltest::write_text(td / "run.json", R"({"total_steps":20,"config":{"clip":1.0},
    "kept_adapter":{"step":5,"val_loss":2.45,"why":"best validation loss"},
    "sessions":[{"started":"a","from_step":0,"to_step":5,"outcome":"stopped: --max-steps reached"},
                {"started":"b","from_step":5,"to_step":7,"outcome":"diverged: 3 rollbacks without recovery"}]})");
  const nl::RunLog run = nl::read_run_log(td.path.string());
  ASSERT_EQ(run.events.size(), 4u);
  EXPECT_EQ(run.events[1].kind, nl::RunEvent::Kind::Rollback);
  EXPECT_EQ(run.events[1].to_step, 3);
  EXPECT_DOUBLE_EQ(run.events[1].lr_scale, 0.5);
  EXPECT_DOUBLE_EQ(run.events[1].t, 5);  // at its step's time
  EXPECT_DOUBLE_EQ(run.events[2].t, 7);  // the resume: at step 5 as redone
  // The first steps 4 and 5 were abandoned by the rollback.
  ASSERT_EQ(run.train.size(), 9u);
  EXPECT_TRUE(run.train[3].superseded && run.train[4].superseded);
  EXPECT_FALSE(run.train[5].superseded);
  ASSERT_EQ(run.warnings.size(), 1u);
  EXPECT_NE(run.warnings[0].find("from_the_future"), std::string::npos);

  const std::string html = nl::render_report_html(run);
  // The last finite training loss is step 6's: the skipped step 7 does not count.
  EXPECT_NE(html.find("Final training loss</th><td>2.4 <span class=\"muted\">(step 6; <b>the last step was"),
            std::string::npos);
  EXPECT_NE(html.find("<th>Ended</th><td><b>diverged</b> at step 7: 3 rollbacks without recovery"), std::string::npos);
  EXPECT_NE(html.find("<th>Kept adapter</th><td>step 5, validation loss 2.45"), std::string::npos);

  // The events table, in log order.
  const size_t table = html.find("<table class=\"events\"");
  ASSERT_NE(table, std::string::npos);
  const std::string events = html.substr(table, html.find("</table>", table) - table);
  std::vector<size_t> at;
  for (const char* what : {"skipped: not applied", "rolled back to step 3, learning rate × 0.5 from now on",
                           "new session: resumed from the checkpoint at step 5", "skipped: not applied",
                           "stopped: diverged"})
    at.push_back(events.find(what, at.empty() ? 0 : at.back() + 1));
  for (size_t i = 0; i < at.size(); ++i) {
    ASSERT_NE(at[i], std::string::npos) << i << "\n" << events;
    if (i) {
      EXPECT_GT(at[i], at[i - 1]) << i;
    }
  }
  EXPECT_NE(events.find("loss spike: 9e6"), std::string::npos);
  EXPECT_EQ(events.find("from_the_future"), std::string::npos);

  // Every time-series chart with data carries the event markers.
  for (const char* id : {"chart-loss", "chart-lr", "chart-gradnorm", "chart-throughput", "chart-steptime"}) {
    const std::string svg = svg_of(html, id);
    ASSERT_FALSE(svg.empty()) << id;
    for (const char* kind : {"session boundary", "rollback", "diverged"})
      EXPECT_NE(svg.find(std::string("class=\"marker\" data-marker=\"") + kind + "\""), std::string::npos) << id << kind;
    EXPECT_EQ(count_of(path_of(svg, kCross, "data-marker"), "M"), 2u * 2) << id << ": steps 5 and 7 skipped";
  }
  const std::string loss = svg_of(html, "chart-loss");
  EXPECT_NE(loss.find(">rollback to 3<"), std::string::npos);
  // The spike of the skipped step is not drawn (it would flatten the curve); the abandoned
  // step 4 is, apart.
  EXPECT_EQ(loss.find(">9e+06<"), std::string::npos);
  EXPECT_FALSE(path_of(loss, "abandoned steps (rolled back or redone)").empty());
  // The gradient norm chart shows the clip threshold.
  EXPECT_NE(svg_of(html, "chart-gradnorm").find(">clipped above<"), std::string::npos);
}

TEST(RunEvents, LearningRateAndGradientNormHaveCharts) {
  nltest::TempDir td;
  write_log(td, eventful_rows());
  const std::string html = nl::render_report_html(nl::read_run_log(td.path.string()));
  const std::string lr = path_of(svg_of(html, "chart-lr"), "learning rate");
  // Every step's learning rate, the abandoned ones too (it is what they ran with): steps 1-5
  // at 1e-3, then 4-7 at 5e-4 after the rollback; wall time goes on, so one stretch of 9.
  EXPECT_EQ(count_of(lr, "M"), 1u) << lr;
  EXPECT_EQ(count_of(lr, "L"), 8u) << lr;
  EXPECT_NE(svg_of(html, "chart-lr").find(">0.001<"), std::string::npos) << "a 1e-3 learning rate keeps its digits";
  const std::string grad = path_of(svg_of(html, "chart-gradnorm"), "gradient norm");
  EXPECT_FALSE(grad.empty());
  // An old log without either figure: one line each, no empty chart.
  write_log(td, {{{"type", "train"}, {"step", 1}, {"loss", 2.0}, {"tokens", 10}, {"tokens_per_s", 5}, {"elapsed_s", 2}}});
  const std::string old = nl::render_report_html(nl::read_run_log(td.path.string()));
  EXPECT_NE(old.find("id=\"chart-lr-none\""), std::string::npos);
  EXPECT_EQ(old.find("<svg id=\"chart-lr\""), std::string::npos);
}

TEST(RunEvents, EarlyStopIsMarkedAndListed) {
  nltest::TempDir td;
  write_log(td, {train(1, 3.0, 1), {{"type", "val"}, {"step", 1}, {"val_loss", 2.9}}, train(2, 2.9, 2),
                 {{"type", "val"}, {"step", 2}, {"val_loss", 2.95}},
                 {{"type", "early_stop"}, {"step", 2}, {"reason", "no validation improvement in 1 evaluation"}}});
  const std::string html = nl::render_report_html(nl::read_run_log(td.path.string()));
  EXPECT_NE(svg_of(html, "chart-loss").find("data-marker=\"early stop\""), std::string::npos);
  EXPECT_NE(html.find("stopped early: no validation improvement"), std::string::npos);
  EXPECT_NE(html.find("<th>Ended</th><td>stopped early at step 2"), std::string::npos);
  EXPECT_EQ(html.find("id=\"events-none\""), std::string::npos);
  // A run with nothing to report says so in one line.
  write_log(td, {train(1, 3.0, 1), train(2, 2.9, 2)});
  EXPECT_NE(nl::render_report_html(nl::read_run_log(td.path.string())).find("id=\"events-none\""), std::string::npos);
}

TEST(RunEvents, XStepsPutsStepsOnEveryChartsAxis) {
  nltest::TempDir td;
  // Steps and time disagree: step 2 at 100 s; a rollback redoes step 2.
  auto rows = std::vector<json>{train(1, 3.0, 10), train(2, 2.9, 100),
                                {{"type", "rollback"}, {"step", 2}, {"to_step", 1}, {"lr_scale", 0.5}, {"reason", "x"}},
                                train(2, 2.8, 110), train(3, 2.7, 120),
                                {{"type", "pace"}, {"step", 3}, {"idle_s", 2}, {"temp_c", 50}},
                                {{"type", "sim"}, {"step", 3}, {"temp_c", 50}, {"work_s", 1}, {"device_s", 1.5},
                                 {"extra_s", 0.5}, {"throttled_s", 0.5}}};
  write_log(td, rows);
  const std::string dir = td.path.string();
  auto by_time = nltest::run_cli("report " + nltest::shq(dir) + " --out " + nltest::shq((td / "t.html").string()));
  ASSERT_EQ(by_time.rc, 0) << by_time.err;
  auto by_step = nltest::run_cli("report " + nltest::shq(dir) + " --x steps --out " + nltest::shq((td / "s.html").string()));
  ASSERT_EQ(by_step.rc, 0) << by_step.err;
  const std::string t = nltest::read_text(td / "t.html"), s = nltest::read_text(td / "s.html");
  for (const char* id : {"chart-loss", "chart-lr", "chart-gradnorm", "chart-throughput", "chart-temperature", "chart-idle",
                         "chart-steptime"}) {
    const std::string ts = svg_of(t, id), ss = svg_of(s, id);
    ASSERT_FALSE(ts.empty()) << id;
    ASSERT_FALSE(ss.empty()) << id;
    EXPECT_NE(ts.find("class=\"xlabel\">wall time (s)<"), std::string::npos) << id;
    EXPECT_NE(ss.find("class=\"xlabel\">step<"), std::string::npos) << id;
    // Whole steps only on the step axis (0, 1, 2, 3), none past the last step.
    EXPECT_NE(ss.find("class=\"xtick\">3<"), std::string::npos) << id;
    EXPECT_EQ(ss.find("class=\"xtick\">0.5<"), std::string::npos) << id;
    EXPECT_EQ(ss.find("class=\"xtick\">4<"), std::string::npos) << id;
  }
  // The rollback at step 2 (100 s) sits where its x says: the plot runs from x = 74 to 1022
  // (948 px) over 0-120 s, or over steps 0-3.
  EXPECT_NE(svg_of(t, "chart-loss").find("data-marker=\"rollback\" x1=\"864.0\""), std::string::npos);  // 100/120
  EXPECT_NE(svg_of(s, "chart-loss").find("data-marker=\"rollback\" x1=\"706.0\""), std::string::npos);  // 2/3
  // The training loss over steps joins step 1 to the redone step 2 (one stretch); over time
  // the abandoned step 2 is a gap in it (no line across the time it took).
  EXPECT_EQ(count_of(path_of(svg_of(s, "chart-loss"), "training loss"), "M"), 1u);
  EXPECT_EQ(count_of(path_of(svg_of(t, "chart-loss"), "training loss"), "M"), 2u);
  EXPECT_NE(s.find("x axis is the training step"), std::string::npos);

  auto bad = nltest::run_cli("report " + nltest::shq(dir) + " --x epochs");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("epochs"), std::string::npos) << bad.err;
}

TEST(RunEvents, RoundingNoisePrintsAsZeroButSmallFiguresKeepTheirDigits) {
  EXPECT_EQ(nl::format_seconds(3.35e-13), "0 s");
  EXPECT_EQ(nl::format_seconds(-3.35e-13), "0 s");
  EXPECT_EQ(nl::format_seconds(4e-5), "40 µs");
  EXPECT_EQ(nl::format_seconds(0.25), "250 ms");
  EXPECT_EQ(nl::format_seconds(0.0004, 1e-3), "0 s");  // below the resolution given
  EXPECT_EQ(nl::format_number(1e-5), "1e-05");         // a learning rate
  EXPECT_EQ(nl::format_number(2.5e-13, 4, 1e-3), "0");
  EXPECT_EQ(nl::format_number(-0.0001, 4, 1e-3), "0");
  EXPECT_EQ(nl::format_share(3.35e-13, 100), "0%");
  EXPECT_EQ(nl::format_share(1, 3), "33.3%");
  EXPECT_EQ(nl::format_share(0.04, 100), "0.04%");
  const std::string bar = nl::render_stacked_bar("b", "t", {{"work", "#111", 120}, {"noise", "#222", 3.35e-13}}, "s");
  EXPECT_NE(bar.find("noise: 0 s (0%)"), std::string::npos) << bar;
  EXPECT_EQ(bar.find("e-13"), std::string::npos);

  // A simulated device whose extra time is its throttling (0.06 - 0.05, as the report computes
  // it, is 0.01 less 5e-18): the difference of the two sums is rounding noise; the page says 0 s.
  nltest::TempDir td;
  std::vector<json> rows;
  for (int i = 1; i <= 3; ++i) {
    rows.push_back(train(i, 2.0, i * 0.2));
    rows.push_back({{"type", "sim"}, {"step", i}, {"temp_c", 60}, {"work_s", 0.05}, {"device_s", 0.06},
                    {"extra_s", 0.01}, {"throttled_s", 0.01}});
  }
  write_log(td, rows);
  const std::string html = nl::render_report_html(nl::read_run_log(td.path.string()));
  EXPECT_NE(html.find("0 s waiting for the simulated device"), std::string::npos) << html;
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\de-1\d)"))) << "a tiny number printed in full";
}

TEST(RunEvents, AnEmptyTemperaturePanelIsOneLine) {
  nltest::TempDir td;
  write_log(td, {train(1, 3.0, 1), train(2, 2.9, 2)});
  const std::string html = nl::render_report_html(nl::read_run_log(td.path.string()));
  EXPECT_EQ(html.find("<svg id=\"chart-temperature\""), std::string::npos);
  const size_t line = html.find("<p class=\"empty-panel\" id=\"chart-temperature-none\">");
  ASSERT_NE(line, std::string::npos);
  const std::string text = html.substr(line, html.find("</p>", line) - line);
  EXPECT_NE(text.find("Temperature:</b> none in this run"), std::string::npos) << text;
  EXPECT_EQ(text.find('\n'), std::string::npos);
  // The idle chart too (no pacing, no simulated device), and memory (no figures).
  EXPECT_NE(html.find("id=\"chart-idle-none\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-memory-none\""), std::string::npos);
}

}  // namespace
