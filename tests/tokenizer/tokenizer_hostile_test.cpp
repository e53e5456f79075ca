// Hostile tokenizer metadata and tokenizer.json files: each gives an nl::Error naming the file
// and the problem, never a crash (this file also runs under ASan/UBSan, see tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <limits>

#include "nightlora/modelio/gguf.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

using namespace nltest;

namespace {

// Writes a GGUF with the given tokenizer keys and returns the error from loading it ("" if none).
std::string gguf_error(const std::vector<std::pair<std::string, nl::GgufValue>>& kv) {
  TempDir tmp;
  const std::string path = (tmp / "hostile.gguf").string();
  nl::GgufWriter w;
  for (const auto& [k, v] : kv) w.set(k, v);
  w.write(path);
  try {
    auto tok = nl::Tokenizer::from_gguf(*nl::GgufFile::open(path));
    tok->encode("hello world <s> \xFF\xFE", true);
    tok->decode({0});
  } catch (const nl::Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerHostile, BadGgufMetadata) {
  using V = nl::GgufValue;
  const V toks = V::str_array({"<unk>", "<s>", "</s>", "a", "b"});
  // Types array of the wrong length.
  std::string e = gguf_error({{"tokenizer.ggml.model", V::str("llama")}, {"tokenizer.ggml.tokens", toks},
                              {"tokenizer.ggml.scores", V::f32_array({0, 0, 0, 0, 0})},
                              {"tokenizer.ggml.token_type", V::i32_array({1, 3})}});
  EXPECT_NE(e.find("token_type"), std::string::npos) << e;
  EXPECT_NE(e.find("hostile.gguf"), std::string::npos) << e;
  // Types of a non-integer kind.
  e = gguf_error({{"tokenizer.ggml.model", V::str("llama")}, {"tokenizer.ggml.tokens", toks},
                  {"tokenizer.ggml.scores", V::f32_array({0, 0, 0, 0, 0})},
                  {"tokenizer.ggml.token_type", V::f32_array({1, 1, 1, 1, 1})}});
  EXPECT_NE(e.find("token_type"), std::string::npos) << e;
  // A "byte" token whose text is not <0xXX> decodes as text.
  e = gguf_error({{"tokenizer.ggml.model", V::str("llama")}, {"tokenizer.ggml.tokens", V::str_array({"<0xZZ>", "<0x4"})},
                  {"tokenizer.ggml.scores", V::f32_array({0, 0})}, {"tokenizer.ggml.token_type", V::i32_array({6, 6})},
                  {"tokenizer.ggml.unknown_token_id", V::u32(0)}});
  EXPECT_EQ(e, "");
  // Scores missing for a SentencePiece tokenizer.
  e = gguf_error({{"tokenizer.ggml.model", V::str("llama")}, {"tokenizer.ggml.tokens", toks}});
  EXPECT_NE(e.find("scores"), std::string::npos) << e;
  // Tokens of the wrong type.
  e = gguf_error({{"tokenizer.ggml.model", V::str("gpt2")}, {"tokenizer.ggml.tokens", V::f32_array({1, 2})}});
  EXPECT_NE(e.find("tokenizer.ggml.tokens"), std::string::npos) << e;
  // A merge without a space; an unknown pre-tokenizer.
  e = gguf_error({{"tokenizer.ggml.model", V::str("gpt2")}, {"tokenizer.ggml.tokens", toks},
                  {"tokenizer.ggml.merges", V::str_array({"ab"})}});
  EXPECT_NE(e.find("merge"), std::string::npos) << e;
  e = gguf_error({{"tokenizer.ggml.model", V::str("gpt2")}, {"tokenizer.ggml.tokens", toks},
                  {"tokenizer.ggml.merges", V::str_array({"a b"})}, {"tokenizer.ggml.pre", V::str("klingon")}});
  EXPECT_NE(e.find("klingon"), std::string::npos) << e;
  // A string where a token id belongs.
  e = gguf_error({{"tokenizer.ggml.model", V::str("llama")}, {"tokenizer.ggml.tokens", toks},
                  {"tokenizer.ggml.scores", V::f32_array({0, 0, 0, 0, 0})}, {"tokenizer.ggml.bos_token_id", V::str("1")}});
  EXPECT_NE(e.find("bos_token_id"), std::string::npos) << e;
  // Out-of-range ids mean "none": loading works, and decoding a bad id is an error.
  e = gguf_error({{"tokenizer.ggml.model", V::str("llama")}, {"tokenizer.ggml.tokens", toks},
                  {"tokenizer.ggml.scores", V::f32_array({0, 0, 0, 0, 0})}, {"tokenizer.ggml.bos_token_id", V::u32(1u << 31)},
                  {"tokenizer.ggml.unknown_token_id", V::u32(0)}});
  EXPECT_EQ(e, "");
}

TEST(TokenizerHostile, BadTokenizerJson) {
  TempDir tmp;
  auto error_of = [&](const std::string& json) -> std::string {
    write_text(tmp / "tokenizer.json", json);
    try {
      auto tok = nl::Tokenizer::from_hf_dir(tmp.path.string());
      tok->encode("ab", true);
    } catch (const nl::Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string pre = "{\"model\": {\"type\": \"BPE\", \"vocab\": ";
  for (const std::string& bad : {pre + "{\"a\": -5}, \"merges\": []}}", pre + "{\"a\": 99999999999}, \"merges\": []}}",
                                 pre + "{\"a\": \"zero\"}, \"merges\": []}}", pre + "[1, 2], \"merges\": []}}",
                                 pre + "{\"a\": 0}, \"merges\": [[1, 2]]}}",
                                 pre + "{\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": -1, \"content\": \"x\"}]}",
                                 pre + "{\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": 3}]}",
                                 pre + "{\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": "
                                       "[{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}, "
                                       "{\"type\": \"ByteLevel\", \"use_regex\": false}]}}",
                                 std::string("[]"), std::string("")}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e, "") << "no error for: " << bad;
    EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  }
  write_text(tmp / "tokenizer.json", pre + "{\"a\": 0}, \"merges\": []}}");
  write_text(tmp / "tokenizer_config.json", "{\"bos_token\": 7, \"chat_template\": [1]");
  EXPECT_THROW(nl::Tokenizer::from_hf_dir(tmp.path.string()), nl::Error);
}

TEST(TokenizerHostile, NonFiniteScoresRepeatedTokensAndALongLine) {
  // NaN and infinite scores, a token text given twice, added tokens that overlap: a long
  // line of these letters and invalid bytes still encodes (every id in range) and the
  // letters decode back.
  using V = nl::GgufValue;
  TempDir tmp;
  const std::string path = (tmp / "hostile.gguf").string();
  nl::GgufWriter w;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  w.set("tokenizer.ggml.model", V::str("llama"));
  w.set("tokenizer.ggml.tokens", V::str_array({"<unk>", "<s>", "</s>", "a", "b", "ab", "ab", "ba", "aa", "<s", "\xE2\x96\x81"}));
  w.set("tokenizer.ggml.scores", V::f32_array({0, 0, 0, 0, 0, nan, -inf, inf, -nan, 0, 0}));
  w.set("tokenizer.ggml.token_type", V::i32_array({2, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1}));
  w.set("tokenizer.ggml.unknown_token_id", V::u32(0));
  w.write(path);
  const auto tok = nl::Tokenizer::from_gguf(*nl::GgufFile::open(path));
  std::string line;
  const std::string_view pieces = "ab\xFF<s>ba<";
  for (size_t i = 0; i < 60000; ++i) line += pieces[i * 7919 % pieces.size()];
  const std::vector<int32_t> ids = tok->encode(line, true);
  ASSERT_FALSE(ids.empty());
  for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << id;
  const std::string letters(20000, 'a');
  EXPECT_EQ(tok->decode(tok->encode(letters + "b" + letters, false)), letters + "b" + letters);
}

}  // namespace
