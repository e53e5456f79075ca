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

namespace {

nl::SamplerOptions penalty_options(float penalty, int last_n) {
  nl::SamplerOptions o;
  o.temperature = 0;
  o.repeat_penalty = penalty;
  o.repeat_last_n = last_n;
  return o;
}

}  // namespace

TEST(Sampler, DefaultsAreLlamaCpps) {
  const nl::SamplerOptions o;  // llama.cpp common/common.h, common_params_sampling
  EXPECT_EQ(o.temperature, 0.8f);
  EXPECT_EQ(o.top_k, 40);
  EXPECT_EQ(o.top_p, 0.95f);
  EXPECT_EQ(o.min_p, 0.05f);
  EXPECT_EQ(o.repeat_penalty, 1.0f);
  EXPECT_EQ(o.repeat_last_n, 64);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOnce) {
  nl::Sampler s(penalty_options(2.0f, 64));
  s.accept(std::vector<int32_t>{0, 1, 0, 0, 7});  // token 0 three times: penalised once; 7: outside the logits
  const std::vector<float> l = {2.0f, -1.0f, 3.0f, 0.5f};
  EXPECT_EQ(s.penalized(l), (std::vector<float>{1.0f, -2.0f, 3.0f, 0.5f}));
  // Greedy takes the penalised argmax: 3 / 1.25 = 2.4 < 2.9.
  nl::Sampler g(penalty_options(1.25f, 64));
  g.accept(0);
  EXPECT_EQ(g.sample(std::vector<float>{3.0f, 2.9f}), 1);
  // Sampling draws from the penalised distribution: logits {ln 4, 0} with token 0 seen and
  // penalty 2 become {ln 2, 0}: probabilities 2/3, 1/3.
  nl::SamplerOptions o = penalty_options(2.0f, 64);
  o.temperature = 1;
  o.top_k = 0;
  o.top_p = 1;
  o.min_p = 0;
  nl::Sampler t(o);
  t.accept(0);
  const auto c = t.candidates(std::vector<float>{std::log(4.0f), 0.0f});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NEAR(c[0].second, 2.0 / 3.0, 1e-6);
  // Off at 1.0: nothing changes.
  nl::Sampler off(penalty_options(1.0f, 64));
  off.accept(0);
  EXPECT_EQ(off.penalized(l), l);
}

TEST(Sampler, RepetitionPenaltyLooksAtTheLastNTokensOnly) {
  const std::vector<float> l = {1.0f, 1.0f, 1.0f, 1.0f};
  nl::Sampler w(penalty_options(2.0f, 2));
  w.accept(std::vector<int32_t>{0, 1, 2});  // the window of 2 holds 1 and 2
  EXPECT_EQ(w.penalized(l), (std::vector<float>{1.0f, 0.5f, 0.5f, 1.0f}));
  w.accept(3);  // now 2 and 3
  EXPECT_EQ(w.penalized(l), (std::vector<float>{1.0f, 1.0f, 0.5f, 0.5f}));
  w.clear_history();
  EXPECT_EQ(w.penalized(l), l);
  nl::Sampler all(penalty_options(2.0f, -1));  // -1: the whole context
  for (int i = 0; i < 200; ++i) all.accept(i % 4 == 0 ? 0 : 3);
  EXPECT_EQ(all.penalized(l), (std::vector<float>{0.5f, 1.0f, 1.0f, 0.5f}));
  nl::Sampler none(penalty_options(2.0f, 0));  // 0: off
  none.accept(0);
  EXPECT_EQ(none.penalized(l), l);
}

TEST(Sampler, MinPDropsTokensFarLessLikelyThanTheTopOne) {
  const auto l = logits_for({0.5, 0.3, 0.15, 0.04, 0.01});
  nl::SamplerOptions o;
  o.temperature = 1;
  o.top_k = 0;
  o.top_p = 1;
  o.min_p = 0.1f;  // keeps p >= 0.05
  auto c = nl::Sampler(o).candidates(l);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_NEAR(c[0].second, 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(c[2].second, 0.15 / 0.95, 1e-6);
  o.min_p = 0.5f;  // keeps p >= 0.25
  EXPECT_EQ(nl::Sampler(o).candidates(l).size(), 2u);
  o.min_p = 1.0f;  // the top token alone
  EXPECT_EQ(nl::Sampler(o).candidates(l).size(), 1u);
  o.min_p = 0;
  EXPECT_EQ(nl::Sampler(o).candidates(l).size(), 5u);
  // After temperature: at 0.5 the odds square (0.25 : 0.09 : 0.0225 : ...), so min-p 0.1
  // (ratio >= 0.1 of the top) keeps the first two only.
  o.temperature = 0.5f;
  o.min_p = 0.1f;
  EXPECT_EQ(nl::Sampler(o).candidates(l).size(), 2u);
}

TEST(Sampler, RejectsBadPenaltyAndMinP) {
  auto bad = [](auto edit) {
    nl::SamplerOptions o;
    edit(o);
    EXPECT_THROW(nl::Sampler{o}, nl::Error);
  };
  bad([](nl::SamplerOptions& o) { o.min_p = 1.5f; });
  bad([](nl::SamplerOptions& o) { o.min_p = NAN; });
  bad([](nl::SamplerOptions& o) { o.repeat_penalty = 0; });
  bad([](nl::SamplerOptions& o) { o.repeat_penalty = -1; });
  bad([](nl::SamplerOptions& o) { o.repeat_penalty = INFINITY; });
  bad([](nl::SamplerOptions& o) { o.repeat_last_n = -2; });
}
