// Sampling on hand-made logits: greedy, temperature, top-k, top-p, and determinism per seed.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "nightlora/infer/sampler.h"
#include "nightlora/util/error.h"

namespace {

nl::Sampler make(float temp, int top_k, float top_p, uint64_t seed = 1) {
  nl::SamplerOptions o;
  o.temperature = temp;
  o.top_k = top_k;
  o.top_p = top_p;
  o.seed = seed;
  return nl::Sampler(o);
}

// Logits whose softmax (at temperature 1) is exactly `probs`.
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

}  // namespace

TEST(Sampler, GreedyPicksArgmaxAndLowestIdOnTies) {
  auto s = make(0, 40, 0.95f);
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -2.0f, 2.9f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 5.0f, 5.0f}), 1);
  EXPECT_EQ(nl::Sampler::argmax(std::vector<float>{-INFINITY, -1.0f}), 1);
  const auto c = s.candidates(std::vector<float>{0.0f, 2.0f});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].first, 1);
  EXPECT_FLOAT_EQ(c[0].second, 1.0f);
}

TEST(Sampler, TemperatureScalesTheSoftmax) {
  const std::vector<float> l = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4 at temperature 1
  auto c1 = make(1, 0, 1).candidates(l);
  ASSERT_EQ(c1.size(), 2u);
  EXPECT_EQ(c1[0].first, 1);
  EXPECT_NEAR(c1[0].second, 0.75, 1e-6);
  // Temperature 0.5 squares the odds: 9 : 1.
  auto c2 = make(0.5f, 0, 1).candidates(l);
  EXPECT_NEAR(c2[0].second, 0.9, 1e-6);
  EXPECT_NEAR(c2[1].second, 0.1, 1e-6);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  const auto l = logits_for({0.1, 0.4, 0.2, 0.3});
  auto c = make(1, 2, 1).candidates(l);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].first, 1);
  EXPECT_EQ(c[1].first, 3);
  EXPECT_NEAR(c[0].second, 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(c[1].second, 0.3 / 0.7, 1e-6);
  // top-k 1 is greedy whatever the seed.
  for (uint64_t seed = 0; seed < 20; ++seed) EXPECT_EQ(make(1, 1, 1, seed).sample(l), 1);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  const auto l = logits_for({0.05, 0.5, 0.15, 0.3});
  auto c = make(1, 0, 0.75f).candidates(l);  // 0.5 + 0.3 >= 0.75
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].first, 1);
  EXPECT_EQ(c[1].first, 3);
  EXPECT_NEAR(c[0].second, 0.5 / 0.8, 1e-6);
  EXPECT_EQ(make(1, 0, 0.4f).candidates(l).size(), 1u);   // the top token alone reaches 0.4
  EXPECT_EQ(make(1, 0, 0.9f).candidates(l).size(), 3u);   // 0.5 + 0.3 + 0.15
  EXPECT_EQ(make(1, 0, 1.0f).candidates(l).size(), 4u);
  // top-k applies first: with k = 3 the nucleus is taken from the renormalised three.
  auto ck = make(1, 3, 0.85f).candidates(l);              // 0.5/0.95 + 0.3/0.95 = 0.84 < 0.85
  EXPECT_EQ(ck.size(), 3u);
}

TEST(Sampler, SameSeedSameDrawsAndFrequenciesFollowTheDistribution) {
  const auto l = logits_for({0.5, 0.3, 0.2});
  auto a = make(1, 0, 1, 42), b = make(1, 0, 1, 42), c = make(1, 0, 1, 43);
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 200; ++i) {
    da.push_back(a.sample(l));
    db.push_back(b.sample(l));
    dc.push_back(c.sample(l));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);

  // 20000 draws: the standard deviation of each frequency is <= 0.0036, so 0.02 is > 5 sigma.
  auto s = make(1, 0, 1, 7);
  std::map<int32_t, int> count;
  for (int i = 0; i < 20000; ++i) ++count[s.sample(l)];
  EXPECT_NEAR(count[0] / 20000.0, 0.5, 0.02);
  EXPECT_NEAR(count[1] / 20000.0, 0.3, 0.02);
  EXPECT_NEAR(count[2] / 20000.0, 0.2, 0.02);
}

TEST(Sampler, NeverDrawsOutsideTheCandidates) {
  const auto l = logits_for({0.02, 0.48, 0.03, 0.47});
  auto s = make(1.5f, 3, 0.9f, 3);
  const auto cand = s.candidates(l);
  for (int i = 0; i < 2000; ++i) {
    const int32_t id = s.sample(l);
    EXPECT_TRUE(std::any_of(cand.begin(), cand.end(), [&](auto& c) { return c.first == id; })) << id;
  }
}

TEST(Sampler, RejectsBadOptions) {
  EXPECT_THROW(make(1, 0, 0.0f), nl::Error);
  EXPECT_THROW(make(NAN, 0, 1), nl::Error);
  EXPECT_THROW(make(0, 0, 1).sample(std::vector<float>{}), nl::Error);
}

TEST(Sampler, NanAndInfiniteLogitsDoNotBreakSampling) {
  const std::vector<float> l = {NAN, 1.0f, -INFINITY, 2.0f, NAN};
  auto s = make(1, 0, 1, 9);
  for (int i = 0; i < 100; ++i) {
    const int32_t id = s.sample(l);
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
  EXPECT_EQ(make(1, 0, 1).candidates(std::vector<float>{-INFINITY, -INFINITY}).size(), 1u);
  EXPECT_EQ(make(1, 0, 1).sample(std::vector<float>{0.0f, INFINITY, 1.0f}), 1);
}

TEST(Sampler, ImpossibleTokensAreNotCandidates) {
  const auto c = make(1, 0, 1).candidates(std::vector<float>{-INFINITY, 0.0f, NAN, 0.0f});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].first, 1);
  EXPECT_EQ(c[1].first, 3);
}
