// `nightlora simulate-thermal`: the table, the JSON lines, and errors for bad flags.
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace {

TEST(SimulateThermalCli, TableShowsBothRunsAndTheirSummaries) {
  nltest::CmdResult r = nltest::run_cli("simulate-thermal --steps 400 --ceiling 52");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("paced run: ceiling 52.0 C"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unpaced   max"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("paced     max"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ceiling 52.0 C: never exceeded"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ceiling 52.0 C: first exceeded at step"), std::string::npos) << "the unpaced run goes above it\n" << r.out;
}

TEST(SimulateThermalCli, JsonLinesPerStepAndSummaries) {
  nltest::CmdResult r = nltest::run_cli("simulate-thermal --steps 300 --duty 0.5 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  int steps[2] = {0, 0};
  std::vector<nlohmann::json> sums;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "step") {
      ++steps[j["run"] == "paced"];
      EXPECT_TRUE(j.contains("temp_c") && j.contains("idle_s") && j.contains("reason"));
    } else {
      sums.push_back(j);
    }
  }
  EXPECT_EQ(steps[0], 300);
  EXPECT_EQ(steps[1], 300);
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0]["run"], "unpaced");
  EXPECT_GT(sums[0]["throttled_s"].get<double>(), 0);
  EXPECT_EQ(sums[1]["run"], "paced");
  EXPECT_NEAR(sums[1]["duty"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(sums[1]["throttled_s"].get<double>(), 0);
}

TEST(SimulateThermalCli, BadFlagsAreClearErrors) {
  nltest::CmdResult r = nltest::run_cli("simulate-thermal --steps 10 --duty 1.5");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--duty"), std::string::npos) << r.err;
  r = nltest::run_cli("simulate-thermal --steps 10 --r -1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--r"), std::string::npos) << r.err;
  r = nltest::run_cli("simulate-thermal --steps 10 --ceiling 20");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("idle device"), std::string::npos) << r.err;
}

}  // namespace
