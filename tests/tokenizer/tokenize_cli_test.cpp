// `nightlora tokenize`: flags, decoding, and clear errors; plus tokenizer.json input errors.
#include <gtest/gtest.h>

#include "corpus_util.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

using namespace nltest;

namespace {

TEST(TokenizeCli, FlagsBosEscapedNoSpecialAndDecode) {
  NL_REQUIRE_SHARED("tinystories-656k", dir);
  const std::string m = " --model " + shq(dir.string());
  // One output line per input line, empty lines included.
  CmdResult r = run_cli("tokenize" + m, "Once upon a time\n\nthe end\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = tokt::split_lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "");
  EXPECT_NE(lines[0], "");
  // --bos prepends <|start_story|> (id 1).
  CmdResult b = run_cli("tokenize --bos" + m, "Once upon a time\n");
  EXPECT_EQ(b.out, "1 " + lines[0] + "\n");
  // --escaped: "\n" is a newline (id 3 in this vocabulary), "\\n" a backslash and an n.
  CmdResult e = run_cli("tokenize --escaped" + m, "a\\nb\n");
  CmdResult raw = run_cli("tokenize" + m, "a\\nb\n");
  EXPECT_NE(e.out, raw.out);
  EXPECT_NE((" " + e.out).find(" 3 "), std::string::npos) << e.out;
  // --no-special: the special token's text is tokenized as plain text.
  CmdResult s = run_cli("tokenize" + m, "x<|end_story|>\n");
  CmdResult ns = run_cli("tokenize --no-special" + m, "x<|end_story|>\n");
  EXPECT_NE((" " + s.out).find(" 2"), std::string::npos) << s.out;
  EXPECT_EQ((" " + ns.out).find(" 2\n"), std::string::npos) << ns.out;
  // --decode inverts, with --escaped output.
  CmdResult d = run_cli("tokenize --decode --escaped" + m, e.out);
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_EQ(d.out, "a\\nb\n");
}

TEST(TokenizeCli, ErrorsNameTheProblem) {
  CmdResult r = run_cli("tokenize --model /nonexistent/model.gguf", "x\n");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  NL_REQUIRE_SHARED("stories260K", dir);
  CmdResult d = run_cli("tokenize --decode --model " + shq((dir / "stories260K.gguf").string()), "1 2 abc\n");
  EXPECT_EQ(d.rc, 1);
  EXPECT_NE(d.err.find("abc"), std::string::npos) << d.err;
  CmdResult big = run_cli("tokenize --decode --model " + shq((dir / "stories260K.gguf").string()), "99999\n");
  EXPECT_EQ(big.rc, 1);
  EXPECT_NE(big.err.find("99999"), std::string::npos) << big.err;
}

TEST(TokenizerJson, UnsupportedOrBrokenFilesAreClearErrors) {
  TempDir tmp;
  auto error_of = [&](const std::string& json) -> std::string {
    write_text(tmp / "tokenizer.json", json);
    try {
      nl::Tokenizer::from_hf_dir(tmp.path.string());
    } catch (const nl::Error& e) {
      return e.what();
    }
    return "";
  };
  std::string e = error_of("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
  EXPECT_NE(e.find("Unigram"), std::string::npos) << e;
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  e = error_of("{\"model\": ");
  EXPECT_NE(e.find("JSON"), std::string::npos) << e;
  e = error_of("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"NFKC\"}}");
  EXPECT_NE(e.find("NFKC"), std::string::npos) << e;
  e = error_of("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"ab\"]}}");
  EXPECT_NE(e.find("merge"), std::string::npos) << e;
  EXPECT_THROW(nl::Tokenizer::from_hf_dir((tmp / "missing").string()), nl::Error);
  // Text with a character the vocabulary lacks and no <unk>: an error, not a crash.
  write_text(tmp / "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
  auto tok = nl::Tokenizer::from_hf_dir(tmp.path.string());
  EXPECT_EQ(tok->encode("aa", false), (std::vector<int32_t>{0, 0}));
  EXPECT_THROW(tok->encode("b", false), nl::Error);
}

}  // namespace

namespace {

// lstrip/rstrip added tokens absorb the whitespace beside them (as Hugging Face tokenizers'
// AddedToken does); normalized=false tokens are matched in the raw text.
TEST(TokenizerJson, AddedTokensHonourLstripAndRstrip) {
  TempDir tmp;
  auto make = [&](bool lstrip, bool rstrip) {
    write_text(tmp / "tokenizer.json",
               std::string("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"\xE2\x96\x81\": 1, \"<m>\": 2}, \"merges\": []},"
                           " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"},"
                           " \"added_tokens\": [{\"id\": 2, \"content\": \"<m>\", \"special\": true, \"normalized\": false,"
                           " \"lstrip\": ") + (lstrip ? "true" : "false") + ", \"rstrip\": " + (rstrip ? "true" : "false") + "}]}");
    return nl::Tokenizer::from_hf_dir(tmp.path.string());
  };
  using Ids = std::vector<int32_t>;
  EXPECT_EQ(make(false, false)->encode("a  <m>  a", false), (Ids{0, 1, 1, 2, 1, 1, 0}));
  EXPECT_EQ(make(true, false)->encode("a  <m>  a", false), (Ids{0, 2, 1, 1, 0}));
  EXPECT_EQ(make(false, true)->encode("a  <m>  a", false), (Ids{0, 1, 1, 2, 0}));
  EXPECT_EQ(make(true, true)->encode("a \t<m>\n a", false), (Ids{0, 2, 0}));
  // With parse_special off, "<m>" is plain text: "<" is not in this vocabulary, which has no
  // <unk>, so encoding it is an error rather than a silent special token.
  EXPECT_THROW(make(true, true)->encode("a <m> a", false, /*parse_special=*/false), nl::Error);
}

}  // namespace

namespace {

// BOS comes from the post-processor template, also inside a Sequence (Llama 3.1/3.2 style);
// tokenizer_config.json's add_bos_token overrides it.
TEST(TokenizerJson, BosFromTemplateProcessingAndConfig) {
  TempDir tmp;
  const std::string model =
      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"<s>\": 1}, \"merges\": []},"
      " \"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
      " \"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, {\"type\": \"TemplateProcessing\","
      " \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}]}}";
  write_text(tmp / "tokenizer.json", model);
  auto tok = nl::Tokenizer::from_hf_dir(tmp.path.string());
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_TRUE(tok->add_bos_default());
  EXPECT_EQ(tok->encode("a<s>a", true), (std::vector<int32_t>{1, 0, 1, 0}));
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_EQ(tok->decode({1, 0}, /*skip_special=*/true), "a");
  write_text(tmp / "tokenizer_config.json", "{\"add_bos_token\": false, \"eos_token\": {\"content\": \"<s>\"}}");
  tok = nl::Tokenizer::from_hf_dir(tmp.path.string());
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_EQ(tok->eos(), 1);
}

}  // namespace
