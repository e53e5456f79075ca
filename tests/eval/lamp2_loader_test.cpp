// The LaMP-2 loader on hand-written files in the official format, for both splits.
#include <gtest/gtest.h>

#include "nightlora/eval/lamp2.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

std::string input_for(const std::string& description) { return nl::lamp2_instruction() + " description: " + description; }

// Two users in LaMP's user-based shape: each question is its own user; profile items have no
// dates (and one carries an extra key, which real files may have).
std::string user_split_questions() {
  return R"([
  {"id": "110", "input": ")" + input_for("A young wizard goes to school.") + R"(",
   "profile": [{"id": "1100", "tag": "fantasy", "description": "Elves and a ring."},
               {"id": "1101", "tag": "comedy", "description": "Two friends on a road trip.", "rating": 4}]},
  {"id": "111", "input": ")" + input_for("  A detective in the rain.  ") + R"(",
   "profile": [{"id": "1110", "tag": "classic", "description": "A film from 1942."}]}
])";
}

TEST(Lamp2Loader, UserSplitFile) {
  const nl::Lamp2Questions q = nl::parse_lamp2_questions(user_split_questions(), "dev_questions.json");
  EXPECT_EQ(q.split, nl::Lamp2Split::User);  // no dates: detected as user-based
  ASSERT_EQ(q.questions.size(), 2u);
  EXPECT_EQ(q.questions[0].id, "110");
  EXPECT_EQ(q.questions[0].user_id, "110");  // no user_id: the question is its own user
  EXPECT_EQ(q.questions[0].description, "A young wizard goes to school.");
  EXPECT_EQ(q.questions[1].description, "A detective in the rain.");  // stripped as LaMP does
  ASSERT_EQ(q.questions[0].profile.size(), 2u);
  EXPECT_EQ(q.questions[0].profile[1].tag, "comedy");
  EXPECT_EQ(q.questions[0].profile[1].description, "Two friends on a road trip.");
  EXPECT_FALSE(q.questions[0].profile[1].date.has_value());
  EXPECT_EQ(nl::lamp2_users(q), (std::vector<std::string>{"110", "111"}));
  EXPECT_EQ(nl::lamp2_user_profile(q, "111")[0].id, "1110");
  EXPECT_THROW(nl::lamp2_user_profile(q, "999"), nl::Error);
  // Undated: chronological order is file order.
  EXPECT_EQ(nl::lamp2_chronological_order(q.questions[0].profile), (std::vector<size_t>{0, 1}));

  const nl::Lamp2Outputs o = nl::parse_lamp2_outputs(
      R"({"task": "LaMP_2", "golds": [{"id": "111", "output": "classic "}, {"id": "110", "output": "fantasy"}]})",
      "dev_outputs.json");
  EXPECT_EQ(o.task, "LaMP_2");
  ASSERT_NE(o.find("110"), nullptr);
  EXPECT_EQ(*o.find("110"), "fantasy");
  EXPECT_EQ(nl::lamp2_golds(q, o), (std::vector<int>{nl::lamp2_tag_index("fantasy"), nl::lamp2_tag_index("classic")}));
}

TEST(Lamp2Loader, TimeSplitFileOrdersByDate) {
  // Time-based: dated items, listed out of order; the user id groups two questions.
  const std::string text = R"([
  {"id": "q1", "user_id": "u7", "input": ")" + input_for("Robots rebel.") + R"(",
   "profile": [{"id": "p2", "tag": "action", "description": "Car chase.", "date": "2019-05-02"},
               {"id": "p0", "tag": "sci-fi", "description": "Space ship.", "date": "2018-12-31"},
               {"id": "p1", "tag": "sci-fi", "description": "Time travel.", "date": "2019-5-1"},
               {"id": "p3", "tag": "romance", "description": "A wedding.", "date": "2019-05-02"}]},
  {"id": "q2", "user_id": "u7", "input": ")" + input_for("Aliens land.") + R"(",
   "profile": [{"id": "p0", "tag": "sci-fi", "description": "Space ship.", "date": 20181231}]}
])";
  const nl::Lamp2Questions q = nl::parse_lamp2_questions(text, "time.json");
  EXPECT_EQ(q.split, nl::Lamp2Split::Time);  // every item dated: detected as time-based
  EXPECT_EQ(nl::lamp2_users(q), (std::vector<std::string>{"u7"}));
  const auto& profile = nl::lamp2_user_profile(q, "u7");
  EXPECT_EQ(profile[2].date, (std::vector<int64_t>{2019, 5, 1}));
  EXPECT_EQ(profile[2].date_text, "2019-5-1");
  EXPECT_EQ(q.questions[1].profile[0].date, (std::vector<int64_t>{20181231}));
  // 2018-12-31 < 2019-5-1 < 2019-05-02 (= 2019-05-02: file order between those two).
  EXPECT_EQ(nl::lamp2_chronological_order(profile), (std::vector<size_t>{1, 2, 0, 3}));
  // Asking for the time split explicitly works too; the user split keeps dates but says user.
  EXPECT_EQ(nl::parse_lamp2_questions(text, "time.json", nl::Lamp2Split::Time).split, nl::Lamp2Split::Time);
  EXPECT_EQ(nl::parse_lamp2_questions(text, "time.json", nl::Lamp2Split::User).split, nl::Lamp2Split::User);
}

TEST(Lamp2Loader, TimeSplitNeedsDates) {
  try {
    nl::parse_lamp2_questions(user_split_questions(), "dev.json", nl::Lamp2Split::Time);
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dev.json: [0].profile[0]: no \"date\""), std::string::npos) << e.what();
  }
}

TEST(Lamp2Loader, ReadsFiles) {
  nltest::TempDir dir;
  nltest::write_text(dir / "q.json", user_split_questions());
  nltest::write_text(dir / "o.json", R"({"task": "LaMP_2", "golds": [{"id": "110", "output": "fantasy"}]})");
  const nl::Lamp2Questions q = nl::load_lamp2_questions((dir / "q.json").string());
  EXPECT_EQ(q.source, (dir / "q.json").string());
  const nl::Lamp2Outputs o = nl::load_lamp2_outputs((dir / "o.json").string());
  // Question 111 has no gold: named, with the outputs file.
  try {
    nl::lamp2_golds(q, o);
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("o.json: no gold output for question \"111\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(nl::load_lamp2_questions((dir / "missing.json").string()), nl::Error);
}

TEST(Lamp2Loader, TagsAndInstruction) {
  EXPECT_EQ(nl::lamp2_tags().size(), 15u);
  EXPECT_EQ(nl::lamp2_tag_index("sci-fi"), 0);
  EXPECT_EQ(nl::lamp2_tag_index("true story"), 14);
  EXPECT_EQ(nl::lamp2_tag_index("Sci-Fi"), -1);
  EXPECT_EQ(nl::lamp2_instruction(),
            "Which tag does this movie relate to among the following tags? Just answer with the tag name without further "
            "explanation. tags: [sci-fi, based on a book, comedy, action, twist ending, dystopia, dark comedy, classic, "
            "psychology, fantasy, romance, thought-provoking, social commentary, violence, true story]");
  EXPECT_EQ(nl::parse_lamp2_split("time"), nl::Lamp2Split::Time);
  EXPECT_THROW(nl::parse_lamp2_split("random"), nl::Error);
}

}  // namespace
