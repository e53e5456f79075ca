// BM25 against values computed by hand (Okapi BM25 with BM25Okapi's idf floor; the numbers
// below were worked out from the formula in bm25.h, k1 = 1.5, b = 0.75, epsilon = 0.25).
#include <cmath>

#include <gtest/gtest.h>

#include "nightlora/eval/bm25.h"

namespace {

const std::vector<std::string> kDocs = {"a dragon and a castle", "a robot story", "the robot robot dance", "a quiet story",
                                        "one red ball"};

TEST(Bm25, TokenizesOnWhitespaceOnly) {
  EXPECT_EQ(nl::bm25_tokenize("  A robot,\tthe\nrobot  "), (std::vector<std::string>{"A", "robot,", "the", "robot"}));
  EXPECT_TRUE(nl::bm25_tokenize(" \t\n").empty());
}

TEST(Bm25, IdfWithFloorForCommonTerms) {
  const nl::Bm25 bm(kDocs);
  // N = 5; "robot" is in 2 documents: ln(3.5 / 2.5).
  EXPECT_NEAR(bm.idf("robot"), std::log(3.5 / 2.5), 1e-12);
  EXPECT_NEAR(bm.idf("castle"), std::log(4.5 / 1.5), 1e-12);
  // "a" is in 3 of 5 documents: ln(2.5 / 3.5) < 0, so it gets 0.25 x the mean idf of the 12
  // vocabulary terms (9 x ln 3, 2 x ln 1.4, ln(2.5/3.5) for "a").
  const double mean = (9 * std::log(3.0) + 2 * std::log(1.4) + std::log(2.5 / 3.5)) / 12;
  EXPECT_NEAR(bm.idf("a"), 0.25 * mean, 1e-12);
  EXPECT_EQ(bm.idf("zebra"), 0.0);
}

TEST(Bm25, ScoresMatchHandComputation) {
  const nl::Bm25 bm(kDocs);
  // "robot story" on d1 = "a robot story" (3 tokens, avgdl 3.6): each term contributes
  // ln(1.4) x 2.5 / (1 + 1.5 x (0.25 + 0.75 x 3 / 3.6)) = 0.3636...
  const std::vector<double> s = bm.scores("robot story");
  ASSERT_EQ(s.size(), 5u);
  EXPECT_NEAR(s[0], 0.0, 1e-12);
  EXPECT_NEAR(s[1], 0.727507538640, 1e-9);
  EXPECT_NEAR(s[2], 0.464099636719, 1e-9);  // robot twice in a 4-token document
  EXPECT_NEAR(s[3], 0.363753769320, 1e-9);
  EXPECT_NEAR(s[4], 0.0, 1e-12);
  // A repeated query term counts each time; a term absent from the corpus adds nothing.
  const std::vector<double> twice = bm.scores("story story zebra");
  EXPECT_NEAR(twice[1], 0.727507538640, 1e-9);
  EXPECT_NEAR(bm.scores("a robot")[0], 0.270475736366, 1e-9);
}

TEST(Bm25, TopNBestFirstTiesLaterFirst) {
  const nl::Bm25 bm(kDocs);
  EXPECT_EQ(bm.top_n("robot story", 3), (std::vector<size_t>{1, 2, 3}));
  // d0 and d4 both score 0: the later one comes first, as LaMP's reversed argsort gives.
  EXPECT_EQ(bm.top_n("robot story", 10), (std::vector<size_t>{1, 2, 3, 4, 0}));
  EXPECT_EQ(bm.top_n("castle", 1), (std::vector<size_t>{0}));
}

TEST(Bm25, EmptyCorpusAndEmptyDocuments) {
  const nl::Bm25 none(std::vector<std::string>{});
  EXPECT_TRUE(none.scores("robot").empty());
  EXPECT_TRUE(none.top_n("robot", 3).empty());
  const nl::Bm25 blank(std::vector<std::string>{"", "  "});
  EXPECT_EQ(blank.scores("robot"), (std::vector<double>{0.0, 0.0}));
}

}  // namespace
