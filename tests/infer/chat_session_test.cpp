// Multi-turn chat (infer/chat_session.h, `nightlora chat`): each turn's prompt is exactly the
// chat template's text of the whole conversation (ours, and the real Jinja templates through
// @huggingface/jinja), earlier turns are not prefilled again (the KV cache is kept), and the
// replies are those a fresh decoder gives on the whole rendered conversation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "infer_test_util.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/chat_session.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/chat_template.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

using namespace nltest;
using json = nlohmann::json;

namespace {

// A tiny random-weight model (f32) with a generated tokenizer holding the family's special
// tokens: "tiny-qwen3" (ChatML markers) or "tiny-llama" (Llama 3 headers).
fs::path tiny_model(const TempDir& td, const std::string& preset) {
  const fs::path p = td / (preset + ".gguf");
  CmdResult r = run_cli("synth-model --preset " + preset + " --type f32 --tokenizer generated --seed 3 " + shq(p.string()));
  EXPECT_EQ(r.rc, 0) << r.err;
  return p;
}

nl::SamplerOptions varied_sampling(uint64_t seed) {
  nl::SamplerOptions s;  // temperature 1 over the whole vocabulary: replies of many kinds of text
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.repeat_penalty = 1.3f;
  s.seed = seed;
  return s;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

TEST(ChatSession, ThreeTurnsRenderTheTemplateKeepTheCacheAndMatchAFreshDecoder) {
  TempDir td;
  for (const auto& [preset, format] : {std::pair{"tiny-qwen3", nl::ChatFormat::Qwen3}, {"tiny-llama", nl::ChatFormat::Llama3}}) {
    SCOPED_TRACE(preset);
    auto model = nl::Model::load(tiny_model(td, preset).string());
    const nl::Tokenizer& tok = *model->tokenizer;
    nl::Decoder decoder(*model, nl::DecoderOptions::exact(2));
    nl::ChatOptions copt;
    copt.system = "You answer briefly.";
    copt.generate.max_new_tokens = 12;
    nl::ChatSession session(decoder, tok, format, copt);
    nl::Sampler sampler(varied_sampling(7));

    std::vector<nl::ChatMessage> conversation = {{"system", copt.system}};
    std::vector<int32_t> cache_before;
    int64_t previous_prompt_tokens = 0;
    for (const std::string user : {"Hello there!", "Tell me a story, please.", "Thanks. Bye"}) {
      SCOPED_TRACE(user);
      nl::Sampler twin = sampler;  // the same random stream, for the fresh decoder below
      std::string streamed;
      const nl::ChatTurn turn = session.send(user, sampler, [&](const std::string& piece) {
        streamed += piece;
        return true;
      });
      conversation.push_back({"user", user});
      // The prompt is the template's text of the whole conversation, with the assistant header.
      EXPECT_EQ(turn.prompt_text, nl::render_chat_text(format, conversation, true));
      const std::vector<int32_t> prompt = nl::encode_chat_text(tok, turn.prompt_text);
      EXPECT_EQ(turn.prompt_tokens, static_cast<int64_t>(prompt.size()));
      // Only what the cache did not hold was fed: the earlier turns' prompts were not.
      const size_t shared = std::min(common_prefix(cache_before, prompt), prompt.size() - 1);
      EXPECT_EQ(turn.reused_tokens, static_cast<int64_t>(shared));
      EXPECT_EQ(turn.prefilled_tokens, turn.prompt_tokens - turn.reused_tokens);
      EXPECT_GE(turn.reused_tokens, previous_prompt_tokens) << "an earlier turn was prefilled again";
      EXPECT_EQ(nl::valid_utf8(streamed), turn.reply);  // what streamed is what the conversation keeps

      // A fresh decoder on the whole rendered conversation, with the same random stream,
      // gives the same reply: the kept cache computes what a full prefill computes.
      nl::Decoder fresh(*model, nl::DecoderOptions::exact(2));
      nl::GenerateOptions gopt = copt.generate;
      gopt.stop_ids = nl::default_stop_ids(tok);
      gopt.vocab_limit = tok.vocab_size();
      const nl::GenerateResult want = nl::generate(fresh, twin, prompt, gopt);
      EXPECT_EQ(turn.generation.ids, want.ids);

      conversation.push_back({"assistant", turn.reply});
      cache_before.assign(session.cached_tokens().begin(), session.cached_tokens().end());
      EXPECT_EQ(decoder.n_past(), static_cast<int64_t>(cache_before.size()));
      previous_prompt_tokens = turn.prompt_tokens;
    }
    EXPECT_EQ(session.messages().size(), 6u);

    // /reset: the conversation starts over; the system message's tokens stay cached.
    session.reset();
    const nl::ChatTurn again = session.send("New topic", sampler);
    EXPECT_EQ(again.prompt_text, nl::render_chat_text(format, {{"system", copt.system}, {"user", "New topic"}}, true));
    EXPECT_GT(again.reused_tokens, 0);
    EXPECT_EQ(session.messages().size(), 2u);
  }
}

TEST(ChatSession, StopStringsEndTheReplyAndAreNotKept) {
  TempDir td;
  auto model = nl::Model::load(tiny_model(td, "tiny-qwen3").string());
  nl::Decoder decoder(*model, nl::DecoderOptions::exact(2));
  nl::ChatOptions copt;
  copt.generate.max_new_tokens = 40;
  nl::ChatSession plain(decoder, *model->tokenizer, nl::ChatFormat::Qwen3, copt);
  nl::Sampler s1(varied_sampling(3));
  const std::string full = plain.send("Hi", s1).reply;
  ASSERT_GE(full.size(), 6u) << "the reply is too short to cut";
  // Stop on a piece from the middle of that reply: the same reply, cut before it.
  const std::string stop = full.substr(full.size() / 2, 2);
  copt.stop_strings = {stop};
  nl::ChatSession cut(decoder, *model->tokenizer, nl::ChatFormat::Qwen3, copt);
  nl::Sampler s2(varied_sampling(3));
  const nl::ChatTurn t = cut.send("Hi", s2);
  EXPECT_TRUE(t.stopped_on_string);
  EXPECT_EQ(t.reply, full.substr(0, full.find(stop)));
}

TEST(ChatSession, AConversationLongerThanTheContextIsAClearError) {
  TempDir td;
  auto model = nl::Model::load(tiny_model(td, "tiny-qwen3").string());
  nl::DecoderOptions dopt = nl::DecoderOptions::exact(2);
  dopt.max_context = 24;
  nl::Decoder decoder(*model, dopt);
  nl::ChatSession session(decoder, *model->tokenizer, nl::ChatFormat::Qwen3);
  nl::Sampler s(varied_sampling(1));
  try {
    session.send(std::string(200, 'x'), s);
    FAIL() << "no error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no longer fits the context"), std::string::npos) << e.what();
  }
}

TEST(ChatSession, ValidUtf8ReplacesBrokenSequences) {
  EXPECT_EQ(nl::valid_utf8("plain é 😀"), "plain é 😀");
  EXPECT_EQ(nl::valid_utf8("a\xC3"), "a\xEF\xBF\xBD");             // cut inside a character
  EXPECT_EQ(nl::valid_utf8("\xE2\x82x"), "\xEF\xBF\xBDx");          // one U+FFFD for the valid prefix
  EXPECT_EQ(nl::valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two bad bytes
  EXPECT_EQ(nl::valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(nl::valid_utf8("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // > U+10FFFF
}

// `nightlora chat` scripted on stdin: three turns and a /reset. Every turn's prompt is what the
// model's real Jinja template (Qwen3's, Llama 3's, from the npm tokenizer packages) renders
// for the conversation so far, replies go to stdout one per line, and no turn prefills the
// earlier turns again.
TEST(ChatCli, ScriptedSessionRendersTheRealTemplatesAndKeepsTheCache) {
  if (node_with_oracles().empty())
    GTEST_SKIP() << "node or tools/js/node_modules missing (run scripts/setup.sh: npm ci in tools/js)";
  TempDir td;
  for (const auto& [preset, format, oracle] :
       {std::tuple{"tiny-qwen3", "qwen3", "qwen3"}, std::tuple{"tiny-llama", "llama3", "llama3"}}) {
    SCOPED_TRACE(preset);
    const fs::path model = tiny_model(td, preset);
    const fs::path transcript = td / (std::string(preset) + ".json");
    const std::string system = "You are a pirate.";
    CmdResult r = run_cli("chat --model " + shq(model.string()) + " --chat-format " + format + " --system " + shq(system) +
                              " -n 10 --temp 1 --top-k 0 --top-p 1 --min-p 0 --seed 5 -t 2 --transcript-json " +
                              shq(transcript.string()),
                          "Hi there\n\nWhat is 2+2?\nTell me more.\n/reset\nStart again\n/quit\nnot read\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    const json t = read_json(transcript);
    const json& turns = t["turns"];
    ASSERT_EQ(turns.size(), 5u) << turns.dump();
    EXPECT_EQ(turns[3]["command"], "/reset");

    // The conversation before each turn, rendered by the real template.
    json cases = json::array();
    json messages = json::array({{{"role", "system"}, {"content", system}}});
    std::string replies;
    for (size_t i = 0; i < turns.size(); ++i) {
      if (turns[i].contains("command")) {
        messages = json::array({{{"role", "system"}, {"content", system}}});
        continue;
      }
      messages.push_back({{"role", "user"}, {"content", turns[i]["user"]}});
      cases.push_back({{"messages", messages}, {"add_generation_prompt", true}});
      messages.push_back({{"role", "assistant"}, {"content", turns[i]["reply"]}});
      replies += turns[i]["reply"].get<std::string>() + "\n";
    }
    CmdResult o = run_cmd("cd " + shq((source_dir() / "tools/js").string()) + " && node render_chat_oracle.mjs " + oracle,
                          cases.dump());
    ASSERT_EQ(o.rc, 0) << o.err;
    const auto want = json::parse(o.out).get<std::vector<std::string>>();
    ASSERT_EQ(want.size(), 4u);
    size_t k = 0;
    for (size_t i = 0; i < turns.size(); ++i) {
      if (turns[i].contains("command")) continue;
      EXPECT_EQ(turns[i]["prompt_text"].get<std::string>(), want[k]) << "turn " << i;
      ++k;
    }
    // The replies alone on stdout, one per turn (the streamed text is the kept reply when it
    // is valid UTF-8, which a random model's bytes need not be).
    if (replies.find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(r.out, replies);
    }
    // Turns 2 and 3 reuse the whole previous prompt from the cache; after /reset the
    // system message's tokens are still there.
    for (size_t i : {1u, 2u}) {
      EXPECT_GE(turns[i]["reused_tokens"].get<int64_t>(), turns[i - 1]["prompt_tokens"].get<int64_t>()) << "turn " << i;
      EXPECT_EQ(turns[i]["prefilled_tokens"].get<int64_t>(),
                turns[i]["prompt_tokens"].get<int64_t>() - turns[i]["reused_tokens"].get<int64_t>());
    }
    EXPECT_GT(turns[4]["reused_tokens"].get<int64_t>(), 0);
    EXPECT_LT(turns[4]["reused_tokens"].get<int64_t>(), turns[2]["prompt_tokens"].get<int64_t>());
  }
}

// `chat` with several scaled adapters replies as the model with them merged does (f32).
TEST(ChatCli, SeveralScaledAdaptersEqualTheMergedModel) {
  TempDir td;
  const fs::path model = tiny_model(td, "tiny-llama");
  auto m = nl::Model::load(model.string());
  for (uint64_t seed : {2u, 6u}) {
    nl::LoraConfig lc;
    lc.rank = 4;
    lc.alpha = 8;
    lc.seed = seed;
    nl::LoraAdapter ad = nl::LoraAdapter::init(m->config, lc);
    uint32_t x = static_cast<uint32_t>(seed);
    for (auto& p : ad.pairs)
      for (auto& b : p.B) {  // a fresh adapter has B = 0: give it values so that it matters
        x = x * 1664525u + 1013904223u;
        b = 0.5f * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
      }
    nl::save_adapter_peft(ad, *m, (td / ("a" + std::to_string(seed))).string());
  }
  const std::string adapters = " --adapter " + shq((td / "a2:0.8").string()) + " --lora " + shq((td / "a6:1.5").string());
  CmdResult merged = run_cli("merge --model " + shq(model.string()) + adapters + " --type f32 -q --out " +
                             shq((td / "merged.gguf").string()));
  ASSERT_EQ(merged.rc, 0) << merged.err;
  const std::string chat = " --chat-format llama3 --temp 0 -n 12 --precision f32 --kv-type f32 -t 2 -q";
  const std::string turns = "Hello\nAnd then?\nGood night\n";
  CmdResult with = run_cli("chat --model " + shq(model.string()) + adapters + chat, turns);
  CmdResult folded = run_cli("chat --model " + shq((td / "merged.gguf").string()) + chat, turns);
  CmdResult base = run_cli("chat --model " + shq(model.string()) + chat, turns);
  ASSERT_EQ(with.rc, 0) << with.err;
  ASSERT_EQ(folded.rc, 0) << folded.err;
  EXPECT_EQ(with.out, folded.out);
  EXPECT_NE(with.out, base.out) << "the adapters do not change the replies: the comparison proves nothing";
}
