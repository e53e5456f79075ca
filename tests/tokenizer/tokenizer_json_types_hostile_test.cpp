// tokenizer.json and tokenizer_config.json with values of the wrong type, ids out of range, or
// numbers no double holds (1e506): each an nl::Error naming the file and the key path, never a
// parser's exception. (Also run under ASan/UBSan: test_hostile_sanitized.)
#include "input_error.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "test_util.h"

namespace {

using nltest::expect_mentions;
using nltest::input_error_of;
using nltest::TempDir;

// A small valid tokenizer.json; each case swaps one fragment of it for a hostile one.
const std::string kTypesTokenizer =
    R"({"model": {"type": "BPE", "dropout": null, "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
        "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
        "normalizer": null, "pre_tokenizer": null})";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

std::string load_error(const TempDir& dir) {
  return input_error_of([&] { nl::Tokenizer::from_hf_dir(dir.path.string()); });
}

TEST(TokenizerJsonHostile, WrongTypesAndOutOfRangeNameTheKey) {
  TempDir tmp;
  nltest::write_text(tmp / "tokenizer.json", kTypesTokenizer);
  ASSERT_NO_THROW(nl::Tokenizer::from_hf_dir(tmp.path.string()));
  struct Case {
    const char* from;
    const char* to;
    const char* place;
    const char* problem;
  };
  const Case cases[] = {
      {"\"b\": 1", "\"b\": 1e506", "model.vocab.b", "out of range"},
      {"\"b\": 1", "\"b\": \"1\"", "model.vocab.b", "expected an integer, found string \"1\""},
      {"\"b\": 1", "\"b\": 1099511627776", "model.vocab.b", "out of range"},
      {"\"b\": 1", "\"b\": -1", "model.vocab.b", "out of range"},
      {"\"b\": 1", "\"b\": 1.5", "model.vocab.b", "expected an integer"},
      {"\"vocab\": {", "\"vocab\": 7, \"x\": {", "model.vocab", "expected an object"},
      {"[\"a b\"]", "[[1, 2]]", "model.merges[0][0]", "expected a string"},
      {"[\"a b\"]", "\"a b\"", "model.merges", "expected an array"},
      {"\"dropout\": null", "\"dropout\": \"0.1\"", "model.dropout", "expected a number"},
      {"\"id\": 3", "\"id\": \"3\"", "added_tokens[0].id", "expected an integer"},
      {"\"id\": 3", "\"id\": 1e400", "added_tokens[0].id", "out of range"},
      {"\"special\": true", "\"special\": \"yes\"", "added_tokens[0].special", "expected true or false"},
      {"\"normalizer\": null", "\"normalizer\": {\"type\": \"Prepend\", \"prepend\": 5}", "normalizer.prepend",
       "expected a string"},
      {"\"pre_tokenizer\": null", "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": \"no\"}",
       "pre_tokenizer.add_prefix_space", "expected true or false"},
      {"\"model\": {", "\"model\": 5, \"m\": {", "model", "expected an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    nltest::write_text(tmp / "tokenizer.json", replaced(kTypesTokenizer, c.from, c.to));
    expect_mentions(load_error(tmp), {"tokenizer.json: \"" + std::string(c.place) + "\"", c.problem});
  }
}

TEST(TokenizerJsonHostile, TokenizerConfigNamesItsKey) {
  TempDir tmp;
  nltest::write_text(tmp / "tokenizer.json", kTypesTokenizer);
  nltest::write_text(tmp / "tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": 5})");
  expect_mentions(load_error(tmp), {"tokenizer_config.json: \"chat_template\"", "expected an array, found number 5"});
  nltest::write_text(tmp / "tokenizer_config.json", R"({"bos_token": {"content": 1e506}})");
  expect_mentions(load_error(tmp), {"tokenizer_config.json: \"bos_token.content\"", "out of range"});
  nltest::write_text(tmp / "tokenizer_config.json", R"({"bos_token": {"content": 7}})");
  expect_mentions(load_error(tmp), {"tokenizer_config.json: \"bos_token.content\"", "expected a string"});
}

}  // namespace
