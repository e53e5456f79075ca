// `nightlora report` on real short training runs of a tiny synthetic model (one paced on the
// simulated device, one not): the page is self-contained, has every chart, and renders in
// headless Chromium (Debian's `chromium`) with every chart's paths in the rendered DOM and a
// screenshot that is a real picture. Skips the browser part when chromium is absent.
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>

#include "tiny_run.h"

namespace {

namespace fs = std::filesystem;
using namespace tinyrun;

// The simulated device of these runs: a 1 s time constant, steps of 0.05 s of work, starting
// warm, so the device throttles within about a second when nothing paces it.
const std::string kSim = "--temp-source sim:c=0.125,step=0.05,start=50 --pace-poll-sec 0.02";

std::string chromium_path() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (fs::exists(p)) return p;
  return "";
}

nltest::CmdResult chromium(const std::string& bin, const fs::path& profile, const std::string& what,
                           const fs::path& page) {
  return nltest::run_cmd("timeout 120 " + nltest::shq(bin) +
                         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                         " --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars"
                         " --user-data-dir=" + nltest::shq(profile.string()) + " " + what + " " +
                         nltest::shq("file://" + page.string()));
}

// The `d` attribute of every series path inside <svg id="id">...</svg> of `html`.
std::vector<std::string> series_paths(const std::string& html, const std::string& id) {
  std::vector<std::string> out;
  const size_t b = html.find("<svg id=\"" + id + "\"");
  if (b == std::string::npos) return out;
  const size_t e = html.find("</svg>", b);
  const std::string svg = html.substr(b, e - b);
  static const std::regex path_re("<path class=\"series\"[^>]* d=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path_re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}

class ReportRender : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nltest::TempDir();
    const fs::path model = make_tiny_model(dir_->path);
    const fs::path valid = nltest::source_dir() / "data/stories/valid.jsonl";
    auto paced = nltest::run_cli(tiny_train_args(model, *dir_ / "paced", 30,
                                            kSim + " --temp-ceiling 56 --val-every 10 --valid " + nltest::shq(valid.string())));
    ASSERT_EQ(paced.rc, 0) << paced.out << paced.err;
    auto unpaced = nltest::run_cli(tiny_train_args(model, *dir_ / "unpaced", 30, kSim));
    ASSERT_EQ(unpaced.rc, 0) << unpaced.out << unpaced.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static nltest::TempDir* dir_;
};
nltest::TempDir* ReportRender::dir_ = nullptr;

const char* kCharts[] = {"chart-loss",     "chart-lr",        "chart-gradnorm", "chart-throughput",
                         "chart-temperature", "chart-idle",   "chart-walltime", "chart-breakdown",
                         "chart-steptime", "chart-memory"};

TEST_F(ReportRender, PageIsSelfContainedWithEveryChartAndTheSummary) {
  const fs::path run = *dir_ / "paced";
  auto r = nltest::run_cli("report " + nltest::shq(run.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("report.html"), std::string::npos) << r.out;
  const std::string html = nltest::read_text(run / "report.html");
  for (const char* id : kCharts) EXPECT_NE(html.find(std::string("<svg id=\"") + id + "\""), std::string::npos) << id;
  // Nothing to fetch and nothing to run: no scripts, no external resources.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=)")));
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(url\((?!#))")));
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(@import)")));
  // The summary: tokens, times, energy (measured or why not), losses, adapter, model, config.
  for (const char* row : {"Tokens", "Wall time", "Active time", "Energy", "Simulated device energy",
                          "Final training loss", "Final validation loss", "Adapter", "Model", "Configuration"})
    EXPECT_NE(html.find(std::string("<th>") + row + "</th>"), std::string::npos) << row;
  EXPECT_NE(html.find("finished"), std::string::npos);
  EXPECT_NE(html.find("adapter.gguf"), std::string::npos);
  EXPECT_NE(html.find("--rank 4"), std::string::npos);
  // The loss chart has both curves, the temperature chart its ceiling line.
  EXPECT_EQ(series_paths(html, "chart-loss").size(), 2u);
  EXPECT_NE(html.find("class=\"reference\""), std::string::npos);

  // --out elsewhere.
  auto o = nltest::run_cli("report " + nltest::shq(run.string()) + " --out " + nltest::shq((*dir_ / "other.html").string()));
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(nltest::read_text(*dir_ / "other.html") == html);
}

TEST_F(ReportRender, UnpacedRunShowsItsThrottledSteps) {
  const fs::path run = *dir_ / "unpaced";
  auto r = nltest::run_cli("report " + nltest::shq(run.string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string html = nltest::read_text(run / "report.html");
  auto temp = series_paths(html, "chart-temperature");
  ASSERT_EQ(temp.size(), 2u) << "temperature and throttled-step markers";
  EXPECT_NE(temp[1].find('Z'), std::string::npos) << "no throttled step drawn";
  EXPECT_NE(html.find("Final validation loss</th><td><span class=\"muted\">none"), std::string::npos);
}

TEST_F(ReportRender, RendersInHeadlessChromiumWithEveryChartDrawn) {
  const std::string bin = chromium_path();
  if (bin.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs Debian's): not rendering";
  const fs::path run = *dir_ / "paced";
  const fs::path page = *dir_ / "render.html";
  ASSERT_EQ(nltest::run_cli("report " + nltest::shq(run.string()) + " --out " + nltest::shq(page.string())).rc, 0);

  auto dom = chromium(bin, *dir_ / "profile-dom", "--dump-dom", page);
  ASSERT_EQ(dom.rc, 0) << dom.err;
  for (const char* id : kCharts) {
    auto paths = series_paths(dom.out, id);
    if (std::string(id) == "chart-breakdown" && paths.empty()) {
      // Present, but this trainer logged no per-step breakdown: the chart says so.
      EXPECT_NE(dom.out.find("no per-step time breakdown"), std::string::npos);
      continue;
    }
    ASSERT_FALSE(paths.empty()) << id << ": no series drawn in the rendered DOM";
    for (const std::string& d : paths) EXPECT_GT(d.size(), 8u) << id << ": empty path";
  }

  const fs::path png = *dir_ / "report.png";
  auto shot = chromium(bin, *dir_ / "profile-shot", "--screenshot=" + nltest::shq(png.string()) + " --window-size=1200,2400",
                       page);
  ASSERT_EQ(shot.rc, 0) << shot.err;
  ASSERT_TRUE(fs::exists(png)) << shot.out << shot.err;
  const std::string bytes = nltest::read_text(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(be32(bytes, 16), 1200u);
  EXPECT_EQ(be32(bytes, 20), 2400u);
  // A page of text and charts compresses far worse than a blank one (a few kB).
  EXPECT_GT(bytes.size(), 60000u) << "the screenshot looks blank";
  std::printf("screenshot: %s (%zu bytes)\n", png.c_str(), bytes.size());
}

}  // namespace
