// serve's decode loop (src/serve/decode_scheduler.h) without HTTP: completions that join it
// at different times, with different sampling settings, adapters, lengths and contexts, get
// exactly the tokens nl::generate gives each alone (greedy and seeded sampling, stop ids,
// max_new_tokens, a full context); a cancelled completion leaves before the loop's next
// step. On tiny-llama (Q4_0, a generated tokenizer) and stories260K (skipped with a message
// when ../shared is absent).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/engine/engine_turns.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/infer/sampler.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "serve/decode_scheduler.h"
#include "test_util.h"

using namespace nltest;

namespace decode_scheduler_test {

struct LoopModel {
  std::string name;
  std::unique_ptr<nl::Model> model;
};

std::vector<LoopModel> loop_models(const fs::path& dir) {
  std::vector<LoopModel> out;
  nl::SynthOptions o;
  o.preset = "tiny-llama";
  o.type = nl::QType::Q4_0;
  o.seed = 7;
  o.tokenizer = "generated";
  nl::synth_model((dir / "tiny-llama.gguf").string(), o);
  out.push_back({"tiny-llama q4_0", nl::Model::load((dir / "tiny-llama.gguf").string())});
  const fs::path shared = shared_models_dir();
  if (!shared.empty() && fs::exists(shared / "stories260K/stories260K.gguf"))
    out.push_back({"stories260K", nl::Model::load((shared / "stories260K/stories260K.gguf").string())});
  else
    std::printf("[decode loop] ../shared/models/stories260K absent: not checked on it\n");
  return out;
}

// One completion: its prompt, sampling, length, context and adapter.
struct Completion {
  std::vector<int32_t> prompt;
  nl::SamplerOptions sampling;
  int64_t max_new = 0;
  int64_t context = 0;  // the decoder's max_context (0: the model's)
  const nl::LoraAdapter* adapter = nullptr;
};

nl::DecoderOptions options_of(const Completion& c) {
  nl::DecoderOptions o;
  o.threads = 2;
  o.max_context = c.context;
  return o;
}

nl::GenerateOptions generation_of(const nl::Model& m, const Completion& c) {
  nl::GenerateOptions g;
  g.max_new_tokens = c.max_new;
  g.stop_ids = nl::default_stop_ids(*m.tokenizer);
  g.vocab_limit = m.tokenizer->vocab_size();
  return g;
}

// What serve's request thread does before joining: the prompt alone, then the loop.
std::shared_ptr<nl::serve::TokenStream> start(nl::serve::DecodeScheduler& loop, nl::EngineTurns& turns,
                                              const nl::Model& m, nl::FrozenEngine& engine, const Completion& c) {
  auto dec = std::make_unique<nl::Decoder>(m, engine, options_of(c));
  dec->set_adapter(c.adapter);
  nl::Sampler sampler(c.sampling);
  sampler.accept(c.prompt);
  std::vector<float> logits;
  {
    const nl::EngineTurns::Turn turn = turns.serve();
    logits = dec->forward(c.prompt);
  }
  return loop.join(std::move(dec), std::move(sampler), std::move(logits), generation_of(m, c));
}

std::vector<int32_t> drain(nl::serve::TokenStream& s) {
  std::vector<int32_t> ids;
  while (const std::optional<int32_t> id = s.next()) ids.push_back(*id);
  return ids;
}

TEST(DecodeLoop, CompletionsGetTheTokensGenerateGivesThemAlone) {
  TempDir tmp;
  for (const LoopModel& lm : loop_models(tmp.path)) {
    const nl::Model& m = *lm.model;
    nl::EngineOptions eo;
    eo.threads = 2;
    auto engine = nl::make_engine(m, eo);
    nl::LoraConfig lc;
    lc.rank = 4;
    lc.seed = 3;
    nl::LoraAdapter adapter = nl::LoraAdapter::init(m.config, lc);
    for (auto& p : adapter.pairs)
      for (size_t i = 0; i < p.B.size(); ++i) p.B[i] = 0.05f * static_cast<float>(static_cast<int>(i % 7) - 3);

    const std::vector<int32_t> text = m.tokenizer->encode("Once upon a time there was a little dog who liked to run", true, false);
    std::vector<Completion> cs(6);
    for (size_t i = 0; i < cs.size(); ++i) {
      Completion& c = cs[i];
      c.prompt.assign(text.begin(), text.begin() + static_cast<long>(2 + 2 * i % text.size()));
      c.max_new = 12 + 9 * static_cast<int64_t>(i);
      c.sampling.temperature = 0;  // greedy unless set below
      c.sampling.seed = 100 + i;
    }
    cs[1].sampling.temperature = 0.9f;  // seeded sampling, llama.cpp's other defaults
    cs[2].sampling.temperature = 1.2f;
    cs[2].sampling.top_k = 0;
    cs[2].sampling.top_p = 0.8f;
    cs[3].sampling.repeat_penalty = 1.3f;
    cs[3].adapter = &adapter;
    cs[4].max_new = 1;
    cs[5].context = static_cast<int64_t>(cs[5].prompt.size()) + 7;  // ends on a full context

    std::vector<nl::GenerateResult> alone;
    for (const Completion& c : cs) {
      nl::Decoder dec(m, *engine, options_of(c));
      dec.set_adapter(c.adapter);
      nl::Sampler sampler(c.sampling);
      alone.push_back(nl::generate(dec, sampler, c.prompt, generation_of(m, c)));
    }

    nl::EngineTurns turns;
    nl::serve::DecodeScheduler loop(*engine, turns, 2);
    // Three start together; the others join while those run (after a few of their tokens).
    std::vector<std::shared_ptr<nl::serve::TokenStream>> streams;
    std::vector<std::vector<int32_t>> got(cs.size());
    for (size_t i = 0; i < 3; ++i) streams.push_back(start(loop, turns, m, *engine, cs[i]));
    for (int k = 0; k < 3; ++k)
      if (const auto id = streams[0]->next()) got[0].push_back(*id);
    for (size_t i = 3; i < cs.size(); ++i) streams.push_back(start(loop, turns, m, *engine, cs[i]));
    for (size_t i = 0; i < cs.size(); ++i) {
      const std::vector<int32_t> rest = drain(*streams[i]);
      got[i].insert(got[i].end(), rest.begin(), rest.end());
      EXPECT_EQ(got[i], alone[i].ids) << lm.name << ": completion " << i;
      EXPECT_EQ(streams[i]->stopped_on_token(), alone[i].stopped_on_token) << lm.name << ": completion " << i;
    }
    EXPECT_EQ(got[4].size(), alone[4].stopped_on_token ? 0u : 1u) << lm.name;
    if (!alone[5].stopped_on_token) {
      EXPECT_EQ(got[5].size(), 8u) << lm.name << ": 7 fed positions + the last token";
    }
    EXPECT_GT(loop.tokens_advanced(), loop.steps()) << lm.name << ": no step carried two completions";
  }
}

TEST(DecodeLoop, ACancelledCompletionLeavesBeforeTheNextStep) {
  TempDir tmp;
  const LoopModel lm = std::move(loop_models(tmp.path).front());
  const nl::Model& m = *lm.model;
  nl::EngineOptions eo;
  eo.threads = 2;
  auto engine = nl::make_engine(m, eo);
  nl::EngineTurns turns;
  nl::serve::DecodeScheduler loop(*engine, turns, 2);
  Completion c;
  c.prompt = m.tokenizer->encode("Once upon a time", true, false);
  c.sampling.temperature = 0;
  c.max_new = 100;
  auto dec = std::make_unique<nl::Decoder>(m, *engine, options_of(c));
  nl::Sampler sampler(c.sampling);
  sampler.accept(c.prompt);
  std::vector<float> logits = dec->forward(c.prompt);
  std::shared_ptr<nl::serve::TokenStream> stream;
  {
    // Holding a serving turn keeps the loop before its first step: it samples the first
    // token from the prompt's logits and waits for the engine.
    const nl::EngineTurns::Turn hold = turns.serve();
    stream = loop.join(std::move(dec), std::move(sampler), std::move(logits), generation_of(m, c));
    ASSERT_TRUE(stream->next().has_value());
    stream->cancel();
    EXPECT_EQ(loop.steps(), 0);
  }
  // The step the loop was waiting for runs (the token was sampled before the cancel); then
  // the completion leaves and its stream ends without another token.
  EXPECT_EQ(stream->next(), std::nullopt);
  EXPECT_FALSE(stream->stopped_on_token());
  EXPECT_EQ(loop.steps(), 1);
  EXPECT_EQ(loop.tokens_advanced(), 1);
}

}  // namespace decode_scheduler_test
