// The synthetic LaMP-2 generator: deterministic by seed, loadable by the loader unchanged,
// and its users' hidden preferences show in the data.
#include <map>

#include <gtest/gtest.h>

#include "nightlora/eval/lamp2.h"
#include "nightlora/eval/lamp2_synth.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

nl::Lamp2SynthOptions small(nl::Lamp2Split split, uint64_t seed) {
  nl::Lamp2SynthOptions o;
  o.users = 3;
  o.items_per_user = 30;
  o.questions_per_user = 5;
  o.seed = seed;
  o.split = split;
  return o;
}

TEST(Lamp2Synth, DeterministicBySeed) {
  const nl::Lamp2Synthetic a = nl::make_lamp2_synthetic(small(nl::Lamp2Split::User, 7));
  const nl::Lamp2Synthetic b = nl::make_lamp2_synthetic(small(nl::Lamp2Split::User, 7));
  const nl::Lamp2Synthetic c = nl::make_lamp2_synthetic(small(nl::Lamp2Split::User, 8));
  EXPECT_EQ(a.questions_json, b.questions_json);
  EXPECT_EQ(a.outputs_json, b.outputs_json);
  EXPECT_EQ(a.readme, b.readme);
  EXPECT_NE(a.questions_json, c.questions_json);
}

TEST(Lamp2Synth, UserSplitLoadsUnchanged) {
  const nl::Lamp2Synthetic s = nl::make_lamp2_synthetic(small(nl::Lamp2Split::User, 1));
  const nl::Lamp2Questions q = nl::parse_lamp2_questions(s.questions_json, "questions.json");
  const nl::Lamp2Outputs o = nl::parse_lamp2_outputs(s.outputs_json, "outputs.json");
  EXPECT_EQ(q.split, nl::Lamp2Split::User);
  EXPECT_EQ(o.task, "LaMP_2");
  ASSERT_EQ(q.questions.size(), 15u);
  EXPECT_EQ(nl::lamp2_users(q), (std::vector<std::string>{"u0", "u1", "u2"}));
  EXPECT_EQ(q.questions[0].id, "u0-q0");
  EXPECT_EQ(q.questions[0].profile.size(), 30u);
  EXPECT_EQ(q.questions[0].profile[0].id, "u0-p0");
  const std::vector<int> golds = nl::lamp2_golds(q, o);  // every gold is one of the 15 tags
  EXPECT_EQ(golds.size(), 15u);
  // The input is the official instruction; the prompt builder finds the description in it.
  EXPECT_EQ(q.questions[0].input, nl::lamp2_instruction() + " description: " + q.questions[0].description);
  EXPECT_EQ(q.questions[0].description.rfind("a ", 0), 0u);
}

TEST(Lamp2Synth, HiddenPreferencesShowInTheData) {
  nl::Lamp2SynthOptions opt = small(nl::Lamp2Split::User, 3);
  opt.noise = 0;
  const nl::Lamp2Synthetic s = nl::make_lamp2_synthetic(opt);
  const nl::Lamp2Questions q = nl::parse_lamp2_questions(s.questions_json, "questions.json");
  ASSERT_EQ(s.users.size(), 3u);
  for (size_t u = 0; u < s.users.size(); ++u) {
    const nl::Lamp2SynthUser& user = s.users[u];
    EXPECT_EQ(user.tags.size(), 4u);
    std::map<std::string, std::string> mapping(user.thing_tag.begin(), user.thing_tag.end());
    // Without noise every item's tag is the user's tag for the thing its description ends with.
    for (const nl::Lamp2ProfileItem& item : nl::lamp2_user_profile(q, user.id)) {
      const std::string thing = item.description.substr(item.description.rfind(' ') + 1);
      ASSERT_TRUE(mapping.count(thing)) << item.description;
      EXPECT_EQ(item.tag, mapping[thing]) << user.id << ": " << item.description;
    }
    EXPECT_NE(s.readme.find("### " + user.id), std::string::npos);
  }
  // Users differ: the mappings are not all the same.
  EXPECT_NE(s.users[0].thing_tag, s.users[1].thing_tag);
}

TEST(Lamp2Synth, TimeSplitIsDatedAndQuestionsComeLast) {
  const nl::Lamp2Synthetic s = nl::make_lamp2_synthetic(small(nl::Lamp2Split::Time, 5));
  const nl::Lamp2Questions q = nl::parse_lamp2_questions(s.questions_json, "questions.json", nl::Lamp2Split::Time);
  const auto& profile = nl::lamp2_user_profile(q, "u1");
  ASSERT_EQ(profile.size(), 30u);
  for (const auto& item : profile) ASSERT_TRUE(item.date.has_value());
  // Listed shuffled; the dates say the order: p0 is the earliest, p29 the latest.
  const std::vector<size_t> order = nl::lamp2_chronological_order(profile);
  EXPECT_EQ(profile[order.front()].id, "u1-p0");
  EXPECT_EQ(profile[order.back()].id, "u1-p29");
  EXPECT_EQ(profile[order.front()].date_text, "2020-01-01");
  EXPECT_EQ(profile[order.back()].date_text, "2020-01-30");
  bool shuffled = false;
  for (size_t i = 0; i < order.size(); ++i) shuffled |= order[i] != i;
  EXPECT_TRUE(shuffled);
  EXPECT_NE(s.readme.find("Time-based split"), std::string::npos);
}

TEST(Lamp2Synth, WritesTheFilesAndRejectsBadOptions) {
  nltest::TempDir dir;
  const nl::Lamp2Synthetic s = nl::make_lamp2_synthetic(small(nl::Lamp2Split::User, 2));
  nl::write_lamp2_synthetic(s, (dir / "data").string());
  EXPECT_EQ(nltest::read_text(dir / "data" / "questions.json"), s.questions_json);
  EXPECT_EQ(nl::load_lamp2_outputs((dir / "data" / "outputs.json").string()).golds.size(), 15u);
  EXPECT_EQ(nltest::read_text(dir / "data" / "README.md"), s.readme);

  nl::Lamp2SynthOptions bad = small(nl::Lamp2Split::User, 0);
  bad.users = 0;
  EXPECT_THROW(nl::make_lamp2_synthetic(bad), nl::Error);
  bad = small(nl::Lamp2Split::User, 0);
  bad.tags_per_user = 16;
  EXPECT_THROW(nl::make_lamp2_synthetic(bad), nl::Error);
  bad = small(nl::Lamp2Split::Auto, 0);
  EXPECT_THROW(nl::make_lamp2_synthetic(bad), nl::Error);
}

}  // namespace
