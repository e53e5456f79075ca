// The default memory budget (memory_budget.h): read from /proc files, half of what is
// available, a quarter in background mode, none under memory pressure or without /proc; and
// the plan a default budget makes never refuses (an explicit --max-memory does).
#include <gtest/gtest.h>

#include "nightlora/host/memory_budget.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/util/error.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

namespace fs = std::filesystem;

void write_proc(const fs::path& root, const std::string& meminfo, const std::string& pressure) {
  fs::create_directories(root / "pressure");
  if (!meminfo.empty()) nltest::write_text(root / "meminfo", meminfo);
  if (!pressure.empty()) nltest::write_text(root / "pressure/memory", pressure);
}

constexpr size_t kGiB = size_t{1} << 30;

TEST(MemoryBudget, ReadsMeminfoAndPressure) {
  nltest::TempDir td;
  write_proc(td.path, "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n",
             "some avg10=1.50 avg60=0.20 avg300=0.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  const nl::MemoryState s = nl::read_memory_state(td.path.string());
  EXPECT_EQ(s.total, size_t{24000000} * 1024);
  EXPECT_EQ(s.available, size_t{20000000} * 1024);
  EXPECT_DOUBLE_EQ(s.pressure_some_avg10, 1.5);

  const nl::MemoryBudget normal = nl::default_memory_budget(s, false);
  EXPECT_EQ(normal.bytes, s.available / 2);
  EXPECT_NE(normal.rule.find("half of the 19.1 GiB available"), std::string::npos) << normal.rule;
  const nl::MemoryBudget bg = nl::default_memory_budget(s, true);
  EXPECT_EQ(bg.bytes, s.available / 4);
  EXPECT_NE(bg.rule.find("background"), std::string::npos) << bg.rule;
}

TEST(MemoryBudget, PressureOrNoProcGivesNoBudget) {
  nl::MemoryState s{24 * kGiB, 2 * kGiB, 0.0};  // under 10% available
  EXPECT_EQ(nl::default_memory_budget(s, false).bytes, 0u);
  EXPECT_NE(nl::default_memory_budget(s, false).rule.find("memory pressure"), std::string::npos);
  s = {24 * kGiB, 20 * kGiB, 12.5};  // tasks stalled on memory 12.5% of the last 10 s
  EXPECT_EQ(nl::default_memory_budget(s, false).bytes, 0u);
  EXPECT_NE(nl::default_memory_budget(s, false).rule.find("12.5%"), std::string::npos);

  nltest::TempDir td;  // nothing there; then garbage, then MemAvailable above MemTotal
  EXPECT_EQ(nl::read_memory_state(td.path.string()).total, 0u);
  EXPECT_EQ(nl::default_memory_budget(nl::read_memory_state(td.path.string()), false).bytes, 0u);
  write_proc(td.path, "MemTotal: lots\nMemAvailable: \xff\xfe kB\n", "some avg10=nan\n");
  EXPECT_EQ(nl::read_memory_state(td.path.string()).total, 0u);
  EXPECT_LT(nl::read_memory_state(td.path.string()).pressure_some_avg10, 0);
  write_proc(td.path, "MemTotal: 100 kB\nMemAvailable: 200 kB\n", "");
  EXPECT_EQ(nl::read_memory_state(td.path.string()).total, 0u);
}

TEST(MemoryBudget, ADefaultBudgetKeepsWhatFitsAndNeverRefuses) {
  nltest::TinyModel tm = nltest::make_tiny_model("qwen2", nl::QType::Q4_0);
  nl::MemoryRequest mr;
  mr.max_tokens = 64;
  mr.rank = 4;
  mr.n_adapter_params = 1000;
  const nl::MemoryPlan one = nl::plan_step_memory(*tm.model, mr);
  ASSERT_EQ(one.kept_blocks, 1);
  // A budget for exactly two kept blocks keeps two, and the printed plan says how it was chosen.
  mr.max_memory = one.estimated_peak_bytes() + one.block_bytes;
  mr.budget_rule = "half of the 1.0 GiB available";
  const nl::MemoryPlan two = nl::plan_step_memory(*tm.model, mr);
  EXPECT_EQ(two.kept_blocks, 2);
  EXPECT_NE(two.describe().find("(half of the 1.0 GiB available)"), std::string::npos) << two.describe();
  // Too small for even one block: a default budget keeps one, --max-memory refuses.
  mr.max_memory = one.estimated_peak_bytes() / 2;
  EXPECT_EQ(nl::plan_step_memory(*tm.model, mr).kept_blocks, 1);
  mr.budget_rule.clear();
  EXPECT_THROW(nl::plan_step_memory(*tm.model, mr), nl::Error);
  // Memory pressure: no budget, one block, and the plan says why.
  mr.max_memory = 0;
  mr.budget_rule = "memory pressure: 0.5 GiB available of 8.0 GiB";
  const nl::MemoryPlan none = nl::plan_step_memory(*tm.model, mr);
  EXPECT_EQ(none.kept_blocks, 1);
  EXPECT_NE(none.describe().find("budget none (memory pressure"), std::string::npos) << none.describe();
}

}  // namespace
