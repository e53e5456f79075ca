// LoRA configuration and PEFT-style initialisation: target parsing, shapes, the
// Kaiming-uniform bound 1/sqrt(in) for A and zero B, determinism from the seed, and clear
// errors for unknown targets and ranks larger than a dimension.
#include <cmath>

#include <gtest/gtest.h>

#include "nightlora/host/lora.h"
#include "nightlora/util/error.h"
#include "tiny_model.h"

namespace {

TEST(LoraConfig, ParsesTargets) {
  auto t = nl::LoraConfig::parse_targets("q, v,down");
  EXPECT_TRUE(t[0] && !t[1] && t[2] && !t[3] && !t[4] && !t[5] && t[6]);
  auto all = nl::LoraConfig::parse_targets("all");
  for (bool b : all) EXPECT_TRUE(b);
  auto hf = nl::LoraConfig::parse_targets("q_proj,gate_proj");
  EXPECT_TRUE(hf[0] && hf[4] && !hf[1]);
  nl::LoraConfig c;
  c.targets = nl::LoraConfig::parse_targets("up,k");
  EXPECT_EQ(c.targets_string(), "k,up");
  EXPECT_EQ(nl::LoraConfig{}.targets_string(), "q,k,v,o,gate,up,down");
  try {
    nl::LoraConfig::parse_targets("q,query");
    FAIL();
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("query"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nl::LoraConfig::parse_targets(" , "), nl::Error);
}

TEST(LoraAdapter, PeftInitShapesBoundsAndDeterminism) {
  auto tm = nltest::make_tiny_model("qwen3");
  const nl::ModelConfig& m = tm.model->config;
  nl::LoraConfig c;
  c.rank = 4;
  c.seed = 123;
  nl::LoraAdapter a = nl::LoraAdapter::init(m, c);
  int64_t expect_params = 0;
  for (int64_t l = 0; l < m.n_layer; ++l)
    for (int p = 0; p < nl::kNumProj; ++p) {
      const auto proj = static_cast<nl::Proj>(p);
      const nl::LoraPair& pr = a.at(l, proj);
      auto [in, out] = nl::proj_shape(m, proj);
      ASSERT_TRUE(pr.enabled);
      EXPECT_EQ(pr.in, in);
      EXPECT_EQ(pr.out, out);
      ASSERT_EQ(static_cast<int64_t>(pr.A.size()), c.rank * in);
      ASSERT_EQ(static_cast<int64_t>(pr.B.size()), out * c.rank);
      expect_params += c.rank * (in + out);
      const float bound = 1.0f / std::sqrt(static_cast<float>(in));
      float max_abs = 0;
      double mean = 0;
      for (float v : pr.A) {
        EXPECT_LE(std::fabs(v), bound);
        max_abs = std::max(max_abs, std::fabs(v));
        mean += v;
      }
      mean /= static_cast<double>(pr.A.size());
      EXPECT_GT(max_abs, 0.8f * bound) << "values should fill the uniform range";
      EXPECT_LT(std::fabs(mean), 0.25 * bound);
      for (float v : pr.B) EXPECT_EQ(v, 0.0f);
    }
  EXPECT_EQ(a.n_params(), expect_params);
  // qwen3's q projection is 64 x 32 (q_dim != d_model).
  EXPECT_EQ(nl::proj_shape(m, nl::Proj::Q), (std::pair<int64_t, int64_t>{32, 64}));
  EXPECT_EQ(nl::proj_shape(m, nl::Proj::O), (std::pair<int64_t, int64_t>{64, 32}));

  nl::LoraAdapter same = nl::LoraAdapter::init(m, c);
  nl::LoraConfig c2 = c;
  c2.seed = 124;
  nl::LoraAdapter other = nl::LoraAdapter::init(m, c2);
  EXPECT_EQ(a.at(1, nl::Proj::Up).A, same.at(1, nl::Proj::Up).A);
  EXPECT_NE(a.at(1, nl::Proj::Up).A, other.at(1, nl::Proj::Up).A);
  // Each pair has its own stream: dropping targets leaves the others' values unchanged.
  nl::LoraConfig c3 = c;
  c3.targets = nl::LoraConfig::parse_targets("up");
  nl::LoraAdapter only_up = nl::LoraAdapter::init(m, c3);
  EXPECT_EQ(only_up.at(1, nl::Proj::Up).A, a.at(1, nl::Proj::Up).A);
  EXPECT_FALSE(only_up.at(1, nl::Proj::Q).enabled);
  EXPECT_EQ(only_up.n_params(), m.n_layer * c.rank * (m.d_model + m.d_ff));

  nl::LoraAdapter z = a.zeros_like();
  EXPECT_EQ(z.n_params(), a.n_params());
  for (const auto& p : z.pairs)
    for (float v : p.A) EXPECT_EQ(v, 0.0f);
}

TEST(LoraAdapter, RankLargerThanADimensionIsAClearError) {
  auto tm = nltest::make_tiny_model("llama");  // kv_dim = 16
  nl::LoraConfig c;
  c.rank = 20;
  try {
    nl::LoraAdapter::init(tm.model->config, c);
    FAIL() << "rank 20 > kv_dim 16 must be an error";
  } catch (const nl::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
    EXPECT_NE(msg.find("16"), std::string::npos) << msg;
  }
  c.targets = nl::LoraConfig::parse_targets("q,o,gate,up,down");  // all >= 32 wide
  EXPECT_NO_THROW(nl::LoraAdapter::init(tm.model->config, c));
  c.rank = 0;
  EXPECT_THROW(nl::LoraAdapter::init(tm.model->config, c), nl::Error);
}

}  // namespace
