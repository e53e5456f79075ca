// nl::DecodeBatch: several sequences advanced one token each through shared engine products.
// Each sequence's logits in a batch must be the very bits it gets alone (Decoder::forward of
// one token), so its greedy tokens are its single-sequence decode's exactly: checked on
// stories260K (skipped with a message when ../shared is absent) and tiny synthetic presets
// (llama Q4_0, qwen2 Q8_0 with QKV bias, qwen3 F16: the int8 mode's steps on F16 run as f32
// products), in the exact f32 mode and the default int8 mode, with sequences that join and
// leave at different steps, prompts of different lengths, one with a LoRA adapter and one
// with another adapter (mixed in one batch), one with an f32 cache among f16 ones, and six
// sequences at once (past the engine's 4-token matrix-vector kernels). Also: a batch refuses
// decoders that do not fit it, before any sequence moves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "decoder_test_models.h"
#include "test_util.h"

using namespace nltest;

namespace decode_batch_test {

using decoder_test_models::NamedModel;

std::vector<NamedModel> batch_models() { return decoder_test_models::stories_and_tiny_presets("decode batch", 5); }

nl::LoraAdapter filled_adapter(const nl::Model& m, uint32_t seed) { return decoder_test_models::filled_adapter(m, seed, seed); }

int32_t greedy_pick(const float* logits, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

// Sequence i of the scenario: its prompt, when it joins (the step before which its prompt
// runs), how many tokens it generates, its adapter and cache type.
struct Plan {
  std::vector<int32_t> prompt;
  int join = 0;
  int new_tokens = 0;
  const nl::LoraAdapter* adapter = nullptr;
  nl::KvType kv = nl::KvType::F16;
};

// Logits of each generated token's choice, alone: the prompt's, then one per greedy step.
std::vector<std::vector<float>> alone(const nl::Model& m, nl::FrozenEngine& engine, nl::DecoderOptions o,
                                      const Plan& p) {
  o.kv_type = p.kv;
  nl::Decoder dec(m, engine, o);
  dec.set_adapter(p.adapter);
  std::vector<std::vector<float>> steps = {dec.forward(p.prompt)};
  while (static_cast<int>(steps.size()) < p.new_tokens) {
    const int32_t id = greedy_pick(steps.back().data(), m.config.vocab);
    steps.push_back(dec.forward(std::vector<int32_t>{id}));
  }
  return steps;
}

TEST(DecodeBatch, EachSequenceGetsItsAloneBitsAndGreedyTokens) {
  for (const NamedModel& bm : batch_models()) {
    const nl::Model& m = *bm.model;
    const int64_t V = m.config.vocab;
    nl::EngineOptions eo;
    eo.threads = 2;
    std::unique_ptr<nl::FrozenEngine> engine = nl::make_engine(m, eo);
    const nl::LoraAdapter ad1 = filled_adapter(m, 1), ad2 = filled_adapter(m, 2);
    const int32_t bos = m.tokenizer && m.tokenizer->bos() >= 0 ? m.tokenizer->bos() : 1;
    std::vector<Plan> plans(6);
    for (int i = 0; i < 6; ++i) {
      plans[static_cast<size_t>(i)].prompt.push_back(bos);
      for (int t = 0; t < 1 + 2 * i; ++t)
        plans[static_cast<size_t>(i)].prompt.push_back(static_cast<int32_t>((29 * t + 17 * i + 3) % std::min<int64_t>(V, 250)));
      plans[static_cast<size_t>(i)].join = (i * 3) % 5;          // 0 3 1 4 2 0
      plans[static_cast<size_t>(i)].new_tokens = 6 + (5 * i) % 9;  // 6 11 7 12 8 13: leave at different steps
    }
    plans[1].adapter = &ad1;
    plans[4].adapter = &ad2;

    for (const bool exact : {true, false}) {
      const std::string what = bm.name + (exact ? ", f32" : ", int8");
      nl::DecoderOptions o = exact ? nl::DecoderOptions::exact(2) : nl::DecoderOptions{};
      o.threads = 2;
      for (size_t i = 0; i < plans.size(); ++i) plans[i].kv = exact || i == 2 ? nl::KvType::F32 : nl::KvType::F16;
      std::vector<std::vector<std::vector<float>>> want;
      for (const Plan& p : plans) want.push_back(alone(m, *engine, o, p));

      nl::DecodeBatch batch(*engine, 2);
      std::vector<std::unique_ptr<nl::Decoder>> decs(plans.size());
      std::vector<std::vector<float>> last(plans.size());  // each sequence's latest logits
      std::vector<int> produced(plans.size(), 0);           // logits rows checked so far
      int most_at_once = 0;
      for (int step = 0; step < 40; ++step) {
        std::vector<nl::Decoder*> seqs;
        std::vector<int32_t> ids;
        std::vector<size_t> who;
        for (size_t i = 0; i < plans.size(); ++i) {
          const Plan& p = plans[i];
          if (step == p.join) {  // joins: its prompt runs alone, then it is in the next step
            nl::DecoderOptions oi = o;
            oi.kv_type = p.kv;
            decs[i] = std::make_unique<nl::Decoder>(m, *engine, oi);
            decs[i]->set_adapter(p.adapter);
            last[i] = decs[i]->forward(p.prompt);
            ASSERT_EQ(last[i], want[i][0]) << what << ": sequence " << i << "'s prompt";
            produced[i] = 1;
          }
          if (!decs[i] || produced[i] >= p.new_tokens) continue;  // not yet, or done
          seqs.push_back(decs[i].get());
          ids.push_back(greedy_pick(last[i].data(), V));
          who.push_back(i);
        }
        if (seqs.empty()) continue;
        most_at_once = std::max(most_at_once, static_cast<int>(seqs.size()));
        const std::vector<float> logits = batch.step(seqs, ids);
        ASSERT_EQ(logits.size(), seqs.size() * static_cast<size_t>(V));
        for (size_t r = 0; r < who.size(); ++r) {
          const size_t i = who[r];
          last[i].assign(logits.begin() + static_cast<long>(r * V), logits.begin() + static_cast<long>((r + 1) * V));
          ASSERT_EQ(last[i], want[i][static_cast<size_t>(produced[i])])
              << what << ": sequence " << i << ", token " << produced[i] << ", step " << step << " with "
              << seqs.size() << " sequences";
          ++produced[i];
        }
      }
      for (size_t i = 0; i < plans.size(); ++i) EXPECT_EQ(produced[i], plans[i].new_tokens) << what << ": " << i;
      EXPECT_EQ(most_at_once, 6) << what;  // the scenario had all six in a step at least once
    }
  }
}

TEST(DecodeBatch, RefusesWhatDoesNotFitBeforeMovingAnySequence) {
  auto m = nl::Model::load(decoder_test_models::tiny_preset("tiny-llama", nl::QType::Q4_0, 5).string());
  auto again = nl::Model::load(decoder_test_models::tiny_preset("tiny-llama", nl::QType::Q4_0, 5).string());  // another Model object
  nl::EngineOptions eo;
  eo.threads = 2;
  auto engine = nl::make_engine(*m, eo), engine2 = nl::make_engine(*m, eo);
  nl::DecoderOptions o;
  o.threads = 2;
  o.max_context = 4;
  nl::Decoder a(*m, *engine, o), b(*m, *engine, o), elsewhere(*m, *engine2, o), other_model(*again, *engine, o);
  nl::DecoderOptions f32 = o;
  f32.precision = nl::Precision::F32;
  nl::Decoder other_mode(*m, *engine, f32);
  a.forward(std::vector<int32_t>{1, 2});
  b.forward(std::vector<int32_t>{1, 2, 3});
  nl::DecodeBatch batch(*engine, 2);
  const auto refused = [&](std::vector<nl::Decoder*> seqs, std::vector<int32_t> ids, const std::string& why) {
    EXPECT_THROW(batch.step(seqs, ids), nl::Error) << why;
    EXPECT_EQ(a.n_past(), 2) << why;
    EXPECT_EQ(b.n_past(), 3) << why;
  };
  refused({}, {}, "no sequence");
  refused({&a, &b}, {1}, "a token short");
  refused({&a, &a}, {1, 1}, "the same decoder twice");
  refused({&a, &elsewhere}, {1, 1}, "a decoder on another engine");
  refused({&b, &a, &other_model}, {1, 1, 1}, "another model");
  refused({&a, &other_mode}, {1, 1}, "another product mode");
  refused({&a, &b}, {1, static_cast<int32_t>(m->config.vocab)}, "a token outside the vocabulary");
  refused({&a, nullptr}, {1, 1}, "a null decoder");
  // b at 3 of its 4 positions takes one more token; then its context is full.
  const std::vector<float> logits = batch.step(std::vector<nl::Decoder*>{&a, &b}, std::vector<int32_t>{5, 6});
  EXPECT_EQ(logits.size(), 2 * static_cast<size_t>(m->config.vocab));
  EXPECT_EQ(a.n_past(), 3);
  EXPECT_EQ(b.n_past(), 4);
  EXPECT_THROW(batch.step(std::vector<nl::Decoder*>{&a, &b}, std::vector<int32_t>{5, 6}), nl::Error);
  EXPECT_EQ(a.n_past(), 3);
  EXPECT_EQ(batch.threads(), 2);
}

}  // namespace decode_batch_test
