// The generic task's data handling (nightly_user_data.h): time order, the held-out split and
// its window, and lines `train` would reject skipped with a count, never fatal.
#include <filesystem>

#include <gtest/gtest.h>

#include "nightlora/eval/nightly_user_data.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

TEST(NightlyUserData, Iso8601Times) {
  EXPECT_EQ(nl::parse_iso8601("1970-01-02"), 86400.0);
  EXPECT_EQ(nl::parse_iso8601("1970-01-01T01:00:00Z"), 3600.0);
  EXPECT_EQ(nl::parse_iso8601("1970-01-01 02:00:00+01:00"), 3600.0);
  EXPECT_EQ(nl::parse_iso8601("1970-01-01T00:01"), 60.0);
  EXPECT_FALSE(nl::parse_iso8601("yesterday").has_value());
  EXPECT_FALSE(nl::parse_iso8601("2026-13-01").has_value());
  EXPECT_FALSE(nl::parse_iso8601("2026-01-01T10:00:00 trailing").has_value());
}

std::vector<nl::UserItem> items(int n) {
  std::vector<nl::UserItem> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)].json = std::to_string(i);
  return v;
}

TEST(NightlyUserData, SplitHoldsOutTheLatestAndBoundsTheWindow) {
  nl::UserSplit s = nl::split_user_items(items(20), 0, 0.2, 3, 200, 0);
  ASSERT_EQ(s.heldout.size(), 4u);
  EXPECT_EQ(s.heldout.front().json, "16");
  EXPECT_EQ(s.train.size(), 16u);
  s = nl::split_user_items(items(10), 0, 0.2, 5, 200, 0);  // the minimum wins over the share
  EXPECT_EQ(s.heldout.size(), 5u);
  s = nl::split_user_items(items(20), 2, 0.2, 5, 200, 6);  // explicit size; a window of 6
  EXPECT_EQ(s.heldout.size(), 2u);
  ASSERT_EQ(s.train.size(), 6u);
  EXPECT_EQ(s.train.front().json, "12");
  EXPECT_EQ(s.n_outside_window, 12);
  s = nl::split_user_items(items(100), 0, 0.2, 5, 12, 0);  // the cap bounds the evaluation
  EXPECT_EQ(s.heldout.size(), 12u);
  s = nl::split_user_items(items(3), 0, 0.2, 5, 200, 0);  // at least one item trains
  EXPECT_EQ(s.train.size(), 1u);
  EXPECT_EQ(s.heldout.size(), 2u);
}

TEST(NightlyUserData, ReadsFilesInTimeOrderAndSkipsWhatTrainRejects) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  const auto model = nl::Model::load(model_path.string());
  nltest::TempDir tmp;
  const std::string long_prompt(4000, 'a');
  nltest::write_text(tmp / "b.jsonl",
                     "{\"prompt\": \"late\", \"completion\": \" x\", \"timestamp\": \"2026-12-06T10:00:00Z\"}\n"
                     "not json\n"
                     "{\"prompt\": \"" + long_prompt + "\", \"completion\": \" x\", \"timestamp\": 5}\n"
                     "{\"text\": \"a text line among prompt/completion\", \"id\": 7}\n"
                     "\n"
                     "{\"prompt\": \"bad time\", \"completion\": \" x\", \"timestamp\": \"soon\"}\n");
  nltest::write_text(tmp / "a.jsonl",
                     "{\"prompt\": \"early\", \"completion\": \" y\", \"timestamp\": 100}\n"
                     "{\"prompt\": \"untimed\", \"completion\": \" z\"}\n");
  nltest::write_text(tmp / "notes.txt", "not data\n");
  nl::DataOptions opt;
  opt.max_tokens = 64;
  const nl::UserData d = nl::read_user_data(tmp.path.string(), "timestamp", *model->tokenizer, opt);
  EXPECT_EQ(d.n_files, 2);
  EXPECT_EQ(d.n_lines, 7);
  EXPECT_EQ(d.format, nl::DataFormat::PromptCompletion);
  EXPECT_EQ(d.n_malformed, 2);      // not json, bad time
  EXPECT_EQ(d.n_unusable, 1);       // the completion falls outside 64 tokens
  EXPECT_FALSE(d.first_problem.empty());
  ASSERT_EQ(d.items.size(), 4u);  // formats mix, as in train's data
  // Untimed first (in file order: a.jsonl, then b.jsonl), then by time; the timestamp key is gone.
  EXPECT_NE(d.items[0].json.find("untimed"), std::string::npos);
  EXPECT_NE(d.items[1].json.find("a text line"), std::string::npos);
  EXPECT_EQ(d.items[1].format, nl::DataFormat::Text);
  EXPECT_NE(d.items[2].json.find("early"), std::string::npos);
  EXPECT_NE(d.items[3].json.find("late"), std::string::npos);
  EXPECT_EQ(d.items[3].json.find("timestamp"), std::string::npos);
  EXPECT_THROW(nl::read_user_data((tmp / "missing").string(), "timestamp", *model->tokenizer, opt), nl::Error);
}

}  // namespace
