// The windows of `eval --text` (eval/text_windows.h): which tokens each window scores.
#include <gtest/gtest.h>

#include <numeric>

#include "nightlora/eval/text_windows.h"
#include "nightlora/util/error.h"

namespace {

std::vector<int32_t> iota_tokens(int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

// Per window: its tokens' ids that are scored.
std::vector<std::vector<int32_t>> scored(const nl::Dataset& d) {
  std::vector<std::vector<int32_t>> out;
  for (const nl::Example& e : d.examples) {
    out.emplace_back();
    for (size_t i = 0; i < e.tokens.size(); ++i)
      if (e.supervised[i]) out.back().push_back(e.tokens[i]);
  }
  return out;
}

}  // namespace

TEST(TextWindows, OverlappingWindowsScoreEachTokenOnce) {
  const nl::Dataset d = nl::text_windows(iota_tokens(10), {4, 2}, "t");
  ASSERT_EQ(d.examples.size(), 4u);
  EXPECT_EQ(d.examples[1].tokens, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(d.examples[3].tokens, (std::vector<int32_t>{6, 7, 8, 9}));
  EXPECT_EQ(scored(d), (std::vector<std::vector<int32_t>>{{1, 2, 3}, {4, 5}, {6, 7}, {8, 9}}));
  EXPECT_EQ(d.n_supervised(), 9);  // every token but the first
  // The last window ends at the end of the text and may be short.
  const nl::Dataset e = nl::text_windows(iota_tokens(9), {4, 3}, "t");
  EXPECT_EQ(scored(e), (std::vector<std::vector<int32_t>>{{1, 2, 3}, {4, 5, 6}, {7, 8}}));
  EXPECT_EQ(e.examples.back().tokens, (std::vector<int32_t>{6, 7, 8}));
  // A text shorter than a window is one window.
  EXPECT_EQ(scored(nl::text_windows(iota_tokens(3), {8, 4}, "t")), (std::vector<std::vector<int32_t>>{{1, 2}}));
}

TEST(TextWindows, DisjointWindowsLeaveEachWindowsFirstTokenUnscored) {
  const nl::Dataset d = nl::text_windows(iota_tokens(10), {4, 4}, "t");
  EXPECT_EQ(scored(d), (std::vector<std::vector<int32_t>>{{1, 2, 3}, {5, 6, 7}, {9}}));
}

TEST(TextWindows, BadOptionsAndShortTextsAreClearErrors) {
  auto message = [](const std::vector<int32_t>& t, nl::TextWindowOptions o) {
    try {
      nl::text_windows(t, o, "story.txt");
    } catch (const nl::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(iota_tokens(10), {4, 5}).find("--stride must be between 1 and --seq-len (4)"), std::string::npos);
  EXPECT_NE(message(iota_tokens(10), {4, 0}).find("--stride"), std::string::npos);
  EXPECT_NE(message(iota_tokens(10), {1, 1}).find("--seq-len must be at least 2"), std::string::npos);
  EXPECT_NE(message(iota_tokens(1), {4, 2}).find("story.txt: the text has 1 token(s)"), std::string::npos)
      << message(iota_tokens(1), {4, 2});
}
