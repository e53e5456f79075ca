// Tag scoring on a real model (stories260K): the fast path (prompt once, the tags as one tree
// after it) gives the bits of the sequential scorer it replaced (each tag's tokens one forward
// after the prompt; also on a tiny qwen3 preset), and the same summed log-probabilities as
// running each prompt + tag from scratch and summing the log-softmax of every completion
// token; the argmax is the predicted tag; greedy generation is parsed as LaMP parses outputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <memory>

#include <gtest/gtest.h>

#include "nightlora/eval/lamp2.h"
#include "nightlora/eval/tag_scoring.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/infer/sampler.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

// The machine running the tests is shared: two threads are plenty for a 260K model.
nl::DecoderOptions two_threads() {
  nl::DecoderOptions o;
  o.threads = 2;
  return o;
}

// Sum of log p(token t | tokens < t) over the completion's tokens, from one full forward of
// prompt + completion (tokenized as the trainer does, BOS included).
double reference_logprob(nl::Decoder& dec, const nl::Tokenizer& tok, const std::string& prompt, const std::string& completion) {
  const std::vector<int32_t> full = tok.encode(prompt + completion, tok.add_bos_default(), true);
  const std::vector<int32_t> p = tok.encode(prompt, tok.add_bos_default(), true);
  size_t start = 0;
  while (start < p.size() && start < full.size() && p[start] == full[start]) ++start;
  dec.reset();
  const std::vector<float> logits = dec.forward(full, /*all_logits=*/true);
  const size_t V = static_cast<size_t>(dec.model().config.vocab);
  double lp = 0;
  for (size_t t = start; t < full.size(); ++t) {
    const float* row = logits.data() + (t - 1) * V;
    double mx = -INFINITY, sum = 0;
    for (size_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    for (size_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
    lp += row[full[t]] - mx - std::log(sum);
  }
  return lp;
}

void expect_matches_reference(nl::Decoder& dec, const nl::Tokenizer& tok, const std::string& prompt) {
  const nl::CompletionScores s = nl::score_lamp2_tags(dec, tok, prompt);
  ASSERT_EQ(s.logprob.size(), 15u);
  int best = 0;
  for (int i = 0; i < 15; ++i) {
    const double ref = reference_logprob(dec, tok, prompt, nl::lamp2_completion(nl::lamp2_tags()[i]));
    EXPECT_NEAR(s.logprob[i], ref, 1e-3 * std::max(1.0, std::abs(ref))) << nl::lamp2_tags()[i];
    EXPECT_GT(s.n_tokens[i], 0);
    EXPECT_LT(s.logprob[i], 0.0);
    if (s.logprob[i] > s.logprob[best]) best = i;
  }
  EXPECT_EQ(s.best, best);
}

TEST(TagScoring, MatchesFullForwardOnStories260K) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  nl::Decoder dec(*model, two_threads());
  const nl::Tokenizer& tok = *model->tokenizer;
  expect_matches_reference(dec, tok, nl::lamp2_prompt("a happy story about a dog"));
  // With retrieved items in the prompt too.
  expect_matches_reference(dec, tok, nl::lamp2_prompt("a sad story about a cat", {{"a big story about a cat", "comedy"}}));
}

TEST(TagScoring, MatchesFullForwardWithAnAdapter) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  nl::LoraConfig cfg;
  cfg.rank = 4;
  cfg.seed = 3;
  nl::LoraAdapter adapter = nl::LoraAdapter::init(model->config, cfg);
  // B is zero after init (the adapter would change nothing): give it values so it does.
  for (nl::LoraPair& p : adapter.pairs)
    for (size_t i = 0; i < p.B.size(); ++i) p.B[i] = 0.05f * std::sin(static_cast<float>(i));
  nl::Decoder dec(*model, two_threads());
  dec.set_adapter(&adapter);
  const std::string prompt = nl::lamp2_prompt("a little story about a robot");
  expect_matches_reference(dec, *model->tokenizer, prompt);
  // The adapter changes the scores.
  nl::Decoder plain(*model, two_threads());
  EXPECT_NE(nl::score_lamp2_tags(dec, *model->tokenizer, prompt).logprob,
            nl::score_lamp2_tags(plain, *model->tokenizer, prompt).logprob);
}

// One scorer over many prompts (the cache kept between them, as lamp2-eval runs) gives the
// same bits as a fresh decoder per prompt, and really reuses the shared instruction.
TEST(TagScoring, CacheKeptAcrossPromptsChangesNoScore) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  const nl::Tokenizer& tok = *model->tokenizer;
  const std::vector<std::string> prompts = {
      nl::lamp2_prompt("a happy story about a dog"),
      nl::lamp2_prompt("a sad story about a cat"),
      nl::lamp2_prompt("a sad story about a cat"),  // the same prompt again: all of it is cached
      nl::lamp2_prompt("a sad story about a cat", {{"a big story about a cat", "comedy"}}),  // retrieval first
      nl::lamp2_prompt("a little story about a robot"),
  };
  nl::Decoder kept(*model, two_threads());
  nl::CompletionScorer scorer(kept, tok);
  for (const std::string& p : prompts) {
    const nl::CompletionScores a = scorer.score_lamp2_tags(p);
    nl::Decoder fresh(*model, two_threads());
    const nl::CompletionScores b = nl::score_lamp2_tags(fresh, tok, p);
    EXPECT_EQ(a.logprob, b.logprob) << p;  // bit for bit
    EXPECT_EQ(a.n_tokens, b.n_tokens);
    EXPECT_EQ(a.best, b.best);
  }
  // The four instruction-first prompts share well over 100 tokens with the one before.
  EXPECT_GT(scorer.tokens_reused(), 300) << "the cache was not reused";
  // forget() drops the cache: the whole prompt runs again.
  const int64_t run_before = scorer.tokens_run();
  scorer.forget();
  scorer.score_lamp2_tags(prompts[0]);
  EXPECT_GE(scorer.tokens_run() - run_before,
            static_cast<int64_t>(tok.encode(prompts[0], tok.add_bos_default(), true).size()));
}

// Tags that begin with the same tokens share their forwards (visited as a tree): each tag's
// score is still the very number it gets scored alone, and fewer tokens run than one
// continuation per tag.
TEST(TagScoring, SharedTagBeginningsChangeNoScore) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  const nl::Tokenizer& tok = *model->tokenizer;
  nl::Decoder dec(*model, two_threads());
  for (const std::string& prompt : {nl::lamp2_prompt("a happy story about a dog"),
                                    nl::lamp2_prompt("a sad story about a cat", {{"a big story about a cat", "comedy"}})}) {
    nl::CompletionScorer scorer(dec, tok);
    const nl::CompletionScores all = scorer.score_lamp2_tags(prompt);
    int64_t one_each = 0;  // continuation tokens without sharing: every tag's but its last
    for (size_t i = 0; i < 15; ++i) {
      nl::Decoder alone_dec(*model, two_threads());
      const nl::CompletionScores alone =
          nl::score_completions(alone_dec, tok, prompt, {nl::lamp2_completion(nl::lamp2_tags()[i])});
      EXPECT_EQ(all.logprob[i], alone.logprob[0]) << nl::lamp2_tags()[i];  // bit for bit
      EXPECT_EQ(all.n_tokens[i], alone.n_tokens[0]);
      one_each += all.n_tokens[i] - 1;
    }
    const int64_t prompt_tokens = static_cast<int64_t>(tok.encode(prompt, tok.add_bos_default(), true).size());
    EXPECT_LT(scorer.tokens_run(), prompt_tokens + one_each) << "no continuation token was shared";
  }
}

// The scorer before the tree (each candidate's continuation one causal forward after the
// prompt, the cache rewound between them), as a reference: the summed log-softmax of each
// completion token, with the scorer's arithmetic (tag_scoring.cpp, LogSoftmaxRow).
std::vector<double> sequential_logprobs(nl::Decoder& dec, const nl::Tokenizer& tok, const std::string& prompt,
                                        const std::vector<std::string>& completions) {
  const size_t V = static_cast<size_t>(dec.model().config.vocab);
  const auto logprob = [&](const float* row, int32_t id) {
    double mx = -INFINITY, sum = 0;
    for (size_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    for (size_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
    return static_cast<double>(row[id]) - mx - std::log(sum);
  };
  std::vector<double> out;
  for (const std::string& c : completions) {
    const std::vector<int32_t> full = tok.encode(prompt + c, tok.add_bos_default(), true);
    const std::vector<int32_t> p = tok.encode(prompt, tok.add_bos_default(), true);
    size_t start = 0;
    while (start < p.size() && start < full.size() && p[start] == full[start]) ++start;
    dec.reset();
    const std::vector<float> last = dec.forward(std::span<const int32_t>(full.data(), start));
    double lp = logprob(last.data(), full[start]);
    if (full.size() - start > 1) {
      const std::vector<float> rows = dec.forward(std::span<const int32_t>(full.data() + start, full.size() - start - 1), true);
      for (size_t t = start + 1; t < full.size(); ++t) lp += logprob(rows.data() + (t - 1 - start) * V, full[t]);
    }
    out.push_back(lp);
  }
  return out;
}

// All of a question's tags in one Decoder::forward_tree give every tag the bits of the
// sequential scorer (a few-token forward per tag, matrix-vector products, against the tree's
// block products) in the f32 mode and in the int8 mode (stories260K's F32 and the tiny qwen3
// preset's F16 weights: int8 products on their Q8_0 copies both ways). Prompts with and
// without retrieval, with an adapter.
TEST(TagScoring, TreeGivesTheSequentialScorersBits) {
  struct Case {
    std::string name;
    std::unique_ptr<nl::Model> model;
  };
  std::vector<Case> cases;
  const fs::path shared = nltest::shared_models_dir();
  if (!shared.empty() && fs::exists(shared / "stories260K/stories260K.gguf"))
    cases.push_back({"stories260K", nl::Model::load((shared / "stories260K/stories260K.gguf").string())});
  else
    std::printf("[tag scoring] ../shared/models/stories260K absent: checked on the tiny qwen3 preset only\n");
  const nltest::TempDir dir;
  nl::SynthOptions so;
  so.preset = "tiny-qwen3";
  so.type = nl::QType::F16;
  so.seed = 4;
  so.tokenizer = "generated";
  nl::synth_model((dir.path / "q3.gguf").string(), so);
  cases.push_back({"tiny-qwen3 f16", nl::Model::load((dir.path / "q3.gguf").string())});
  std::vector<std::string> tags;
  for (const std::string& t : nl::lamp2_tags()) tags.push_back(nl::lamp2_completion(t));
  for (const Case& c : cases) {
    nl::LoraConfig cfg;
    cfg.rank = 4;
    cfg.seed = 5;
    nl::LoraAdapter adapter = nl::LoraAdapter::init(c.model->config, cfg);
    for (nl::LoraPair& p : adapter.pairs)
      for (size_t i = 0; i < p.B.size(); ++i) p.B[i] = 0.05f * std::sin(static_cast<float>(i));
    const nl::Tokenizer& tok = *c.model->tokenizer;
    for (const bool exact : {true, false}) {
      nl::DecoderOptions o = exact ? nl::DecoderOptions::exact(2) : two_threads();
      nl::Decoder dec(*c.model, o), seq(*c.model, o);
      dec.set_adapter(&adapter);
      seq.set_adapter(&adapter);
      nl::CompletionScorer scorer(dec, tok);
      for (const std::string& prompt : {nl::lamp2_prompt("a happy story about a dog"),
                                        nl::lamp2_prompt("a sad story about a cat", {{"a big story about a cat", "comedy"}}),
                                        nl::lamp2_prompt("a little story about a robot")}) {
        const nl::CompletionScores got = scorer.score(prompt, tags);
        const std::vector<double> want = sequential_logprobs(seq, tok, prompt, tags);
        EXPECT_EQ(got.logprob, want) << c.name << (exact ? ", f32" : ", int8") << ": " << prompt;
      }
    }
  }
}

// A context with room for the prompt and any one tag but not for the whole tree: the tree
// runs in parts, and every score is the bits the roomy decoder gives.
TEST(TagScoring, TreeRunsInPartsWhenTheContextIsShort) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  const nl::Tokenizer& tok = *model->tokenizer;
  const std::string prompt = nl::lamp2_prompt("a happy story about a dog");
  size_t longest = 0;  // prompt + tag tokens of the longest candidate
  for (const std::string& t : nl::lamp2_tags())
    longest = std::max(longest, tok.encode(prompt + nl::lamp2_completion(t), tok.add_bos_default(), true).size());
  nl::DecoderOptions o = nl::DecoderOptions::exact(2);
  nl::Decoder roomy(*model, o);
  o.max_context = static_cast<int64_t>(longest);
  nl::Decoder tight(*model, o);
  nl::CompletionScorer a(roomy, tok), b(tight, tok);
  const nl::CompletionScores want = a.score_lamp2_tags(prompt), got = b.score_lamp2_tags(prompt);
  EXPECT_EQ(got.logprob, want.logprob);
  EXPECT_EQ(got.best, want.best);
  EXPECT_GT(b.tokens_run(), a.tokens_run()) << "the tree fit: the test does not test parts";
  // One token less and the longest tag does not fit at all: the decoder's context error.
  o.max_context = static_cast<int64_t>(longest) - 2;
  nl::Decoder too_short(*model, o);
  EXPECT_THROW(nl::score_lamp2_tags(too_short, tok, prompt), nl::Error);
}

TEST(TagScoring, CompletionThatAddsNothingIsAnError) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  nl::Decoder dec(*model, two_threads());
  EXPECT_THROW(nl::score_completions(dec, *model->tokenizer, "Once upon a time", {" there", ""}), nl::Error);
}

TEST(TagScoring, GenerationIsGreedyAndParsed) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  std::unique_ptr<nl::Model> model = nl::Model::load(path.string());
  const nl::Tokenizer& tok = *model->tokenizer;
  nl::Decoder dec(*model, two_threads());
  const std::string prompt = nl::lamp2_prompt("a happy story about a dog");
  const nl::GeneratedTag g = nl::generate_lamp2_tag(dec, tok, prompt, 8);
  // The same greedy run through the generation loop directly.
  nl::SamplerOptions sopt;
  sopt.temperature = 0;
  nl::Sampler sampler(sopt);
  nl::GenerateOptions gopt;
  gopt.max_new_tokens = 8;
  gopt.stop_ids = nl::default_stop_ids(tok);
  gopt.vocab_limit = tok.vocab_size();
  const std::vector<int32_t> ids = tok.encode(prompt, tok.add_bos_default(), true);
  const nl::GenerateResult r = nl::generate(dec, sampler, ids, gopt);
  std::vector<int32_t> all = ids;
  all.insert(all.end(), r.ids.begin(), r.ids.end());
  const std::string whole = tok.decode(all), head = tok.decode(ids);
  std::string expected = whole.substr(head.size());
  if (size_t nl_at = expected.find('\n'); nl_at != std::string::npos) expected = expected.substr(0, nl_at + 1);
  EXPECT_EQ(g.text, expected);
  EXPECT_EQ(g.tag, nl::parse_lamp2_output(g.text));
}

TEST(TagScoring, ParsesOutputsAsLaMPDoes) {
  EXPECT_EQ(nl::parse_lamp2_output(" comedy"), 2);
  EXPECT_EQ(nl::parse_lamp2_output("dark comedy \nand more"), 6);
  EXPECT_EQ(nl::parse_lamp2_output("\ttrue story\n"), 14);
  EXPECT_EQ(nl::parse_lamp2_output("Comedy"), -1);  // exact match only
  EXPECT_EQ(nl::parse_lamp2_output("comedy."), -1);
  EXPECT_EQ(nl::parse_lamp2_output("the tag is comedy"), -1);
  EXPECT_EQ(nl::parse_lamp2_output(""), -1);
  EXPECT_EQ(nl::parse_lamp2_output("\n comedy"), -1);  // the first line is empty
}

}  // namespace
