// Reading a run folder for the report: rows placed on the wall-time axis, per-step fields
// recognised by name, energy summed over sessions, and clear errors for what is not a run.
#include <gtest/gtest.h>

#include "nightlora/report/html_report.h"
#include "nightlora/report/run_log.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& dir) {
  try {
    nl::read_run_log(dir);
  } catch (const nl::Error& e) {
    return e.what();
  }
  return "";
}

const char* kLog =
    R"({"type":"val","step":0,"val_loss":3.5,"supervised":10}
{"type":"train","step":1,"loss":3.4,"tokens":100,"tokens_per_s":50,"elapsed_s":2,"energy_j":4,"frozen_forward_s":0.5,"adapter_s":0.25,"peak_rss_bytes":1048576}
{"type":"pace","step":1,"step_s":2,"idle_s":1.5,"throttled":false,"slowdown":1,"reason":"cooling","temp_c":51}
{"type":"train","step":2,"loss":3.1,"tokens":100,"tokens_per_s":25,"elapsed_s":7.5,"energy_j":10}
{"type":"sim","step":2,"temp_c":58,"extra_s":0.5,"throttled_s":1,"sim_energy_j":12}
{"type":"val","step":2,"val_loss":3.0,"supervised":10}
{"type":"wait","step":2,"reason":"paused by SIGUSR1"}
{"type":"train","step":3,"loss":2.9,"tokens":100,"tokens_per_s":100,"elapsed_s":9,"energy_j":3}
{"type":"mystery","step":3}
)";

TEST(RunLog, RowsArePlacedOnTheWallTimeAxisAndFieldsRecognisedByName) {
  nltest::TempDir td;
  nltest::write_text(td / "log.jsonl", kLog);
  nl::RunLog run = nl::read_run_log(td.path.string());
  ASSERT_EQ(run.train.size(), 3u);
  EXPECT_DOUBLE_EQ(run.train[0].step_s, 2.0);  // tokens / tokens_per_s
  EXPECT_DOUBLE_EQ(run.train[1].step_s, 4.0);
  ASSERT_EQ(run.train[0].time_parts.size(), 2u);
  EXPECT_DOUBLE_EQ(run.train[0].time_parts.at("frozen_forward_s"), 0.5);
  EXPECT_DOUBLE_EQ(run.train[0].memory.at("peak_rss_bytes"), 1048576);
  EXPECT_TRUE(run.train[1].time_parts.empty());  // tokens_per_s and elapsed_s are not parts
  ASSERT_EQ(run.val.size(), 2u);
  EXPECT_DOUBLE_EQ(run.val[0].t, 0.0);
  EXPECT_DOUBLE_EQ(run.val[1].t, 7.5);  // at the time of step 2
  ASSERT_EQ(run.pace.size(), 1u);
  EXPECT_DOUBLE_EQ(run.pace[0].t, 2.0);
  EXPECT_EQ(run.pace[0].temp_c, 51.0);
  ASSERT_EQ(run.sim.size(), 1u);
  EXPECT_DOUBLE_EQ(run.sim[0].temp_c, 58.0);
  ASSERT_EQ(run.waits.size(), 1u);
  EXPECT_EQ(run.waits[0].reason, "paused by SIGUSR1");
  // The energy counter restarted (a new session) after 10 J: 10 + 3.
  std::string why;
  ASSERT_TRUE(run.energy_j(&why).has_value());
  EXPECT_DOUBLE_EQ(*run.energy_j(&why), 13.0);
  ASSERT_EQ(run.warnings.size(), 1u);  // the unknown row type, counted
  EXPECT_NE(run.warnings[0].find("\"mystery\""), std::string::npos);

  const std::string html = nl::render_report_html(run);
  EXPECT_NE(html.find("13 J"), std::string::npos);
  EXPECT_NE(html.find("frozen forward"), std::string::npos);
  EXPECT_NE(html.find("paused by SIGUSR1"), std::string::npos);
  EXPECT_NE(html.find("mystery"), std::string::npos);  // the warning is on the page
}

TEST(RunLog, NestedBreakdownInSecondsAndMemoryInMiB) {
  nltest::TempDir td;
  nltest::write_text(td / "log.jsonl",
                     "{\"type\":\"train\",\"step\":1,\"loss\":2,\"tokens\":10,\"tokens_per_s\":5,\"elapsed_s\":2,"
                     "\"step_s\":2,\"breakdown_s\":{\"frozen_forward\":0.5,\"adapter\":0.25,\"overlap\":0.1},"
                     "\"peak_rss_mib\":12.5,\"arena_mib\":2}\n");
  nl::RunLog run = nl::read_run_log(td.path.string());
  ASSERT_EQ(run.train.size(), 1u);
  const auto& parts = run.train[0].time_parts;
  EXPECT_EQ(parts.size(), 3u);
  EXPECT_DOUBLE_EQ(parts.at("frozen_forward_s"), 0.5);
  EXPECT_DOUBLE_EQ(parts.at("adapter_s"), 0.25);
  EXPECT_DOUBLE_EQ(run.train[0].memory.at("peak_rss_mib"), 12.5 * 1024 * 1024);  // in bytes
  EXPECT_DOUBLE_EQ(run.train[0].memory.at("arena_mib"), 2.0 * 1024 * 1024);
  const std::string html = nl::render_report_html(run);
  EXPECT_NE(html.find("id=\"chart-frozen\""), std::string::npos);  // the engine's view, apart
  const size_t bar = html.find("<svg id=\"chart-breakdown\"");
  ASSERT_NE(bar, std::string::npos);
  const std::string host_bar = html.substr(bar, html.find("</svg>", bar) - bar);
  EXPECT_NE(host_bar.find("adapter"), std::string::npos);
  EXPECT_EQ(host_bar.find("overlap"), std::string::npos);  // derived, not a part of the step
  EXPECT_NE(html.find("12.5 MiB"), std::string::npos);
}

TEST(RunLog, EnergyUnavailableGivesTheReasonFromRunJson) {
  nltest::TempDir td;
  nltest::write_text(td / "log.jsonl",
                     "{\"type\":\"train\",\"step\":1,\"loss\":2,\"tokens\":10,\"tokens_per_s\":5,\"elapsed_s\":2,"
                     "\"energy_j\":\"unavailable\"}\n");
  nltest::write_text(td / "run.json", R"({"energy":{"unavailable":"no RAPL counter and no battery"},"total_steps":4,
    "sessions":[{"started":"2026-01-01T00:00:00Z","from_step":0}]})");
  nl::RunLog run = nl::read_run_log(td.path.string());
  std::string why;
  EXPECT_FALSE(run.energy_j(&why).has_value());
  EXPECT_EQ(why, "no RAPL counter and no battery");
  const std::string html = nl::render_report_html(run);
  EXPECT_NE(html.find("unavailable <span class=\"muted\">(no RAPL counter and no battery)"), std::string::npos);
  EXPECT_NE(html.find("running, or killed"), std::string::npos);  // the session has no recorded end
  EXPECT_NE(html.find("step 1 of 4"), std::string::npos);
}

TEST(RunLog, MalformedLinesAreErrorsWithTheLineNumberButACutLastLineIsAWarning) {
  nltest::TempDir td;
  const std::string good = "{\"type\":\"train\",\"step\":1,\"loss\":2,\"tokens\":10,\"tokens_per_s\":5,\"elapsed_s\":2}\n";
  nltest::write_text(td / "log.jsonl", good + "{\"type\":\"train\",\"step\":2,\"lo\n" + good);
  std::string e = error_of(td.path.string());
  EXPECT_NE(e.find("log.jsonl:2"), std::string::npos) << e;
  EXPECT_NE(e.find("not a JSON line"), std::string::npos) << e;

  nltest::write_text(td / "log.jsonl", good + "[1,2]\n");
  e = error_of(td.path.string());
  EXPECT_NE(e.find("log.jsonl:2"), std::string::npos) << e;
  EXPECT_NE(e.find("\"type\""), std::string::npos) << e;

  // A last line without its newline: a job writing it now, or killed mid-line.
  nltest::write_text(td / "log.jsonl", good + "{\"type\":\"train\",\"st");
  nl::RunLog run = nl::read_run_log(td.path.string());
  EXPECT_EQ(run.train.size(), 1u);
  ASSERT_EQ(run.warnings.size(), 1u);
  EXPECT_NE(run.warnings[0].find("line 2"), std::string::npos);
  EXPECT_NE(nl::render_report_html(run).find("class=\"warn\""), std::string::npos);
}

TEST(RunLog, MissingOrEmptyRunsAreClearErrors) {
  nltest::TempDir td;
  std::string e = error_of((td / "nope").string());
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  e = error_of(td.path.string());
  EXPECT_NE(e.find("no log.jsonl"), std::string::npos) << e;
  nltest::write_text(td / "log.jsonl", "\n\n");
  e = error_of(td.path.string());
  EXPECT_NE(e.find("no rows yet"), std::string::npos) << e;
  nltest::write_text(td / "file", "x");
  e = error_of((td / "file").string());
  EXPECT_NE(e.find("not a folder"), std::string::npos) << e;

  // Through the CLI: non-zero exit and the message.
  auto r = nltest::run_cli("report " + nltest::shq((td / "nope").string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  auto r2 = nltest::run_cli("report " + nltest::shq(td.path.string()));
  EXPECT_NE(r2.rc, 0);
  EXPECT_NE(r2.err.find("no rows yet"), std::string::npos) << r2.err;
}

}  // namespace
