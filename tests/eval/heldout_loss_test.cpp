// The held-out loss at evaluation speed (several examples per forward, the loss in chunks of
// supervised tokens, the last block on supervised rows only) gives in f32 exactly, bit for
// bit, each example's loss as the training step's forward pass computes it for that example
// alone (what heldout_loss computed before it packed examples): on the real stories260K
// model and on the tiny synthetic presets of every architecture (llama, qwen2 with QKV bias,
// qwen3 with Q/K norm), quantized, with and without an adapter, for every packing size.
// int8 moves each loss by a little; bad input is a clear error.
#include <cmath>
#include <fstream>
#include <memory>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../host/tiny_model.h"
#include "nightlora/data/batcher.h"
#include "nightlora/data/dataset.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/eval/heldout_loss.h"
#include "nightlora/eval/lamp2.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/train_step.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// The per-example loss as heldout_loss computed it before packing: TrainStep::forward_only,
// one example per batch, f32, the base model as a zero rank-1 adapter on q.
std::vector<nl::ExampleLoss> one_by_one(const nl::Model& model, const nl::LoraAdapter* adapter, const nl::Dataset& data) {
  nl::LoraAdapter zero;
  if (!adapter) {
    nl::LoraConfig lc;
    lc.rank = 1;
    lc.targets = nl::LoraConfig::parse_targets("q");
    zero = nl::LoraAdapter::init(model.config, lc);
    adapter = &zero;
  }
  int64_t longest = 0;
  for (const nl::Example& e : data.examples) longest = std::max<int64_t>(longest, static_cast<int64_t>(e.tokens.size()));
  nl::MemoryRequest mr;
  mr.max_tokens = longest;
  mr.rank = adapter->cfg.rank;
  mr.n_adapter_params = adapter->n_params();
  const nl::MemoryPlan memory = nl::plan_step_memory(model, mr);
  nl::EngineOptions eo;
  eo.threads = 2;
  std::unique_ptr<nl::FrozenEngine> engine = nl::make_engine(model, eo);
  const nl::PrecisionPlan precision = nl::PrecisionPlan::uniform(model.config.n_layer, nl::Precision::F32);
  nl::StepOptions so;
  so.threads = 2;
  so.memory = &memory;
  so.precision = &precision;
  nl::TrainStep step(model, *engine, so);
  std::vector<nl::ExampleLoss> out;
  for (size_t i = 0; i < data.examples.size(); ++i) {
    const nl::StepResult r = step.forward_only(nl::pack_batch(data.examples, {static_cast<int64_t>(i)}), *adapter);
    out.push_back({r.loss_sum, r.n_supervised});
  }
  return out;
}

nl::HeldoutOptions packing(int64_t max_batch_tokens, int64_t loss_chunk = 64) {
  nl::HeldoutOptions o;
  o.threads = 2;
  o.max_batch_tokens = max_batch_tokens;
  o.loss_chunk = loss_chunk;
  return o;
}

void expect_identical(const nl::HeldoutLoss& got, const std::vector<nl::ExampleLoss>& want, const std::string& what) {
  ASSERT_EQ(got.examples.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.examples[i].n_supervised, want[i].n_supervised) << what << ", example " << i;
    EXPECT_EQ(got.examples[i].loss_sum, want[i].loss_sum) << what << ", example " << i;  // bit for bit
  }
}

// Examples of varied lengths with varied supervision: prompt/completion-like (a supervised
// tail), all supervised, none supervised (nothing to predict), and a single token.
nl::Dataset random_examples(int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
  nl::Dataset ds;
  ds.source = "random.jsonl";
  const int64_t lengths[] = {37, 5, 130, 1, 64, 9, 200, 17, 3, 90};
  for (int64_t i = 0; i < 10; ++i) {
    nl::Example e;
    e.line = i + 1;
    const int64_t n = lengths[i];
    for (int64_t t = 0; t < n; ++t) e.tokens.push_back(tok(rng));
    const int64_t prompt = i % 3 == 0 ? 0 : (i % 3 == 1 ? n / 2 : n);  // all, a tail, none
    for (int64_t t = 0; t < n; ++t) e.supervised.push_back(t > 0 && t >= prompt ? 1 : 0);
    ds.examples.push_back(std::move(e));
  }
  return ds;
}

// Examples that start alike, as a task's prompts do (LaMP-2's instruction): a 45-token head
// shared by all (not a multiple of the attention's query block), then tails of 1 to 130
// tokens supervised from varied points after the head; one example unsupervised (not
// scored: it does not limit the prefix), and with `early` one whose supervision starts at
// token 30, inside the head, so only 29 tokens can run once for all.
nl::Dataset shared_head_examples(int64_t vocab, uint32_t seed, bool early) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> head;
  for (int i = 0; i < 45; ++i) head.push_back(tok(rng));
  nl::Dataset ds;
  ds.source = "shared_head.jsonl";
  const int64_t tails[] = {12, 1, 130, 40, 7, 64, 3, 25};
  for (int64_t i = 0; i < 8; ++i) {
    nl::Example e;
    e.line = i + 1;
    e.tokens = head;
    for (int64_t t = 0; t < tails[i]; ++t) e.tokens.push_back(tok(rng));
    const int64_t n = static_cast<int64_t>(e.tokens.size());
    int64_t from = 45 + (i % 3) * tails[i] / 3;  // the whole tail, its last two thirds, its last third
    if (i == 4) from = n;                         // nothing supervised
    if (early && i == 5) from = 30;
    for (int64_t t = 0; t < n; ++t) e.supervised.push_back(t >= from ? 1 : 0);
    ds.examples.push_back(std::move(e));
  }
  return ds;
}

std::unique_ptr<nl::Model> tiny(const nltest::TempDir& dir, const std::string& preset, nl::QType type) {
  nl::SynthOptions so;
  so.preset = preset;
  so.type = type;
  so.seed = 5;
  so.tokenizer = "generated";
  const fs::path path = dir / (preset + ".gguf");
  nl::synth_model(path.string(), so);
  return nl::Model::load(path.string());
}

void check_every_packing(const nl::Model& model, const nl::Dataset& data, const std::string& name) {
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.targets = nl::LoraConfig::parse_targets("all");
  const nl::LoraAdapter adapter = nltest::random_adapter(model.config, lc, 11);
  const std::vector<nl::ExampleLoss> base = one_by_one(model, nullptr, data);
  const std::vector<nl::ExampleLoss> adapted = one_by_one(model, &adapter, data);
  // 1: one example per forward; 150: a few; 100000: all in one forward. Chunk 7: the loss
  // chunks cut across examples.
  for (int64_t tokens : {int64_t{1}, int64_t{150}, int64_t{100000}}) {
    nl::HeldoutScorer scorer(model, packing(tokens, tokens == 150 ? 7 : 64));
    expect_identical(scorer.score(nullptr, data), base, name + " base, packed to " + std::to_string(tokens));
    expect_identical(scorer.score(&adapter, data), adapted, name + " adapter, packed to " + std::to_string(tokens));
  }
}

TEST(HeldoutLoss, PackedEqualsOneExampleAtATimeOnStories260K) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  nl::DataOptions dopt;
  dopt.max_tokens = 128;
  nl::Dataset data = nl::load_jsonl_dataset((nltest::source_dir() / "data/stories/valid.jsonl").string(), *model->tokenizer, dopt);
  ASSERT_GE(data.examples.size(), 5u);
  // Prompt/completion-like supervision on some of them (the gate's data is prompt/completion).
  for (size_t i = 0; i < data.examples.size(); i += 2)
    for (size_t t = 0; t < data.examples[i].supervised.size() / 2; ++t) data.examples[i].supervised[t] = 0;
  check_every_packing(*model, data, "stories260K");
}

TEST(HeldoutLoss, PackedEqualsOneExampleAtATimeOnEveryArchitecture) {
  nltest::TempDir dir;
  for (const auto& [preset, type] : {std::pair<std::string, nl::QType>{"tiny-llama", nl::QType::Q4_0},
                                     {"tiny-qwen2", nl::QType::Q8_0}, {"tiny-qwen3", nl::QType::F16}}) {
    std::unique_ptr<nl::Model> model = tiny(dir, preset, type);
    check_every_packing(*model, random_examples(model->config.vocab, 3), preset);
  }
}

// The tokens the examples share run once (their keys and values kept per layer) and each
// example's own rows attend to them: the same bits as every example run whole, alone.
TEST(HeldoutLoss, SharedPrefixRunOnceEqualsOneExampleAtATime) {
  nltest::TempDir dir;
  for (const auto& [preset, type] : {std::pair<std::string, nl::QType>{"tiny-llama", nl::QType::Q4_0},
                                     {"tiny-qwen2", nl::QType::Q8_0}, {"tiny-qwen3", nl::QType::F16}}) {
    std::unique_ptr<nl::Model> model = tiny(dir, preset, type);
    for (bool early : {false, true}) {
      const nl::Dataset data = shared_head_examples(model->config.vocab, 7, early);
      // The head up to the first supervised position: 45 tokens less the one that predicts
      // the first supervised token (example 1's tail of 1 is supervised from token 45).
      EXPECT_EQ(nl::heldout_loss(*model, nullptr, data, packing(100000)).shared_prefix, early ? 29 : 44) << preset;
      check_every_packing(*model, data, preset + (early ? ", supervised inside the head" : ""));
    }
  }
}

// On the real model with LaMP-2's prompts: the instruction runs once.
TEST(HeldoutLoss, SharedPrefixOnStories260KLamp2Prompts) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  nltest::TempDir dir;
  const fs::path jsonl = dir / "heldout.jsonl";
  {
    std::ofstream f(jsonl);
    const char* descriptions[] = {"A boy and his dog find a lost treasure map.", "Two sisters run a bakery in Paris.",
                                  "A detective hunts a thief across the city at night.", "Robots learn to paint."};
    const char* tags[] = {"fantasy", "romance", "action", "sci-fi"};
    for (int i = 0; i < 4; ++i)
      f << nlohmann::ordered_json{{"prompt", nl::lamp2_prompt(descriptions[i], {})},
                                  {"completion", nl::lamp2_completion(tags[i])}}.dump() << "\n";
  }
  const nl::Dataset data = nl::load_jsonl_dataset(jsonl.string(), *model->tokenizer, nl::DataOptions{});
  EXPECT_GT(nl::heldout_loss(*model, nullptr, data, packing(100000)).shared_prefix, 50);
  check_every_packing(*model, data, "stories260K LaMP-2 prompts");
}

TEST(HeldoutLoss, Int8StaysCloseToF32) {
  nltest::TempDir dir;
  std::unique_ptr<nl::Model> model = tiny(dir, "tiny-qwen2", nl::QType::Q4_0);
  const nl::Dataset data = random_examples(model->config.vocab, 4);
  nl::HeldoutOptions f32 = packing(2048), int8 = packing(2048);
  int8.precision = nl::Precision::Int8;
  const nl::HeldoutLoss a = nl::heldout_loss(*model, nullptr, data, f32);
  const nl::HeldoutLoss b = nl::heldout_loss(*model, nullptr, data, int8);
  ASSERT_EQ(a.examples.size(), b.examples.size());
  bool any_differs = false;
  for (size_t i = 0; i < a.examples.size(); ++i) {
    EXPECT_EQ(a.examples[i].n_supervised, b.examples[i].n_supervised);
    // Per supervised token, int8 activations move the NLL by well under 1% here.
    EXPECT_NEAR(a.examples[i].mean(), b.examples[i].mean(), 0.01 * std::max(1.0, a.examples[i].mean())) << i;
    any_differs |= a.examples[i].loss_sum != b.examples[i].loss_sum;
  }
  EXPECT_TRUE(any_differs) << "int8 gave f32's numbers: the precision option is not reaching the engine";
  EXPECT_TRUE(b.finite());
}

TEST(HeldoutLoss, BadInputIsAClearError) {
  nltest::TempDir dir;
  std::unique_ptr<nl::Model> model = tiny(dir, "tiny-llama", nl::QType::Q8_0);
  nl::Dataset empty;
  empty.source = "empty.jsonl";
  EXPECT_THROW(nl::heldout_loss(*model, nullptr, empty, packing(64)), nl::Error);
  nl::Dataset bad = random_examples(model->config.vocab, 5);
  bad.examples[2].tokens[1] = static_cast<int32_t>(model->config.vocab);  // outside the vocabulary
  try {
    nl::heldout_loss(*model, nullptr, bad, packing(64));
    FAIL() << "a token outside the vocabulary was accepted";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
  // An adapter made for another shape of model.
  nl::ModelConfig other = model->config;
  other.n_layer += 1;
  nl::LoraConfig lc;
  lc.rank = 2;
  const nl::LoraAdapter wrong = nl::LoraAdapter::init(other, lc);
  EXPECT_THROW(nl::heldout_loss(*model, &wrong, random_examples(model->config.vocab, 6), packing(64)), nl::Error);
}

}  // namespace
