// JSONL data: the three formats, which tokens are supervised, truncation, and every error.
#include "nightlora/data/dataset.h"

#include <gtest/gtest.h>

#include "char_tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

using nltest::CharTokenizer;
using nltest::supervised_text;

nl::Dataset parse(const std::string& text, const nl::Tokenizer& tok, nl::DataOptions opt = {}) {
  return nl::parse_jsonl_dataset(text, "d.jsonl", tok, opt);
}

// The nl::Error message of parsing `text` with bad lines as errors, or "" when it parses.
std::string error_of(const std::string& text, const nl::Tokenizer& tok, nl::DataOptions opt = {}) {
  opt.bad_lines = nl::BadLines::Error;
  try {
    parse(text, tok, opt);
  } catch (const nl::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Dataset, TextIsBosTextEosAllSupervised) {
  CharTokenizer tok;
  nl::Dataset ds = parse("{\"text\": \"hi!\"}\n", tok);
  ASSERT_EQ(ds.examples.size(), 1u);
  EXPECT_EQ(ds.format, nl::DataFormat::Text);
  const nl::Example& e = ds.examples[0];
  EXPECT_EQ(e.tokens, (std::vector<int32_t>{1, 'h' + 3, 'i' + 3, '!' + 3, 2}));
  EXPECT_EQ(e.supervised, (std::vector<uint8_t>{0, 1, 1, 1, 1}));
  EXPECT_EQ(e.line, 1);
}

TEST(Dataset, NoBosWhenTheTokenizerSaysSo) {
  CharTokenizer tok(/*add_bos=*/false);
  nl::Example e = parse("{\"text\": \"ab\"}", tok).examples[0];
  EXPECT_EQ(e.tokens, (std::vector<int32_t>{'a' + 3, 'b' + 3, 2}));
  EXPECT_EQ(e.supervised, (std::vector<uint8_t>{0, 1, 1}));  // the first token has no predecessor
}

TEST(Dataset, PromptCompletionSupervisesCompletionAndEos) {
  CharTokenizer tok;
  nl::Dataset ds = parse("{\"prompt\": \"Q: 2+2? \", \"completion\": \"A: 4\"}\n", tok);
  EXPECT_EQ(ds.format, nl::DataFormat::PromptCompletion);
  const nl::Example& e = ds.examples[0];
  EXPECT_EQ(tok.decode(e.tokens), "<s>Q: 2+2? A: 4</s>");
  EXPECT_EQ(supervised_text(tok, e), "A: 4</s>");
}

TEST(Dataset, TrainOnAllSupervisesEverythingButTheFirstToken) {
  CharTokenizer tok;
  nl::DataOptions opt;
  opt.train_on = nl::TrainOn::All;
  nl::Example e = parse("{\"prompt\": \"ab\", \"completion\": \"c\"}", tok, opt).examples[0];
  EXPECT_EQ(supervised_text(tok, e), "abc</s>");
  EXPECT_EQ(e.supervised[0], 0);
}

TEST(Dataset, MessagesSuperviseExactlyTheAssistantPieces) {
  CharTokenizer tok(/*add_bos=*/false);
  nl::DataOptions opt;
  opt.chat_format = nl::ChatFormat::ChatML;
  std::vector<nl::ChatMessage> conv = {
      {"user", "Hello"}, {"assistant", "Hi there"}, {"user", "Bye"}, {"assistant", "See you"}};
  std::string line = R"({"messages": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"},)"
                     R"( {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "See you"}]})";
  nl::Dataset ds = parse(line, tok, opt);
  EXPECT_EQ(ds.format, nl::DataFormat::Messages);
  const nl::Example& e = ds.examples[0];
  // The expectation comes from the renderer's own pieces: all text, and the trainable text.
  std::string all, trainable;
  for (const auto& p : nl::render_chat(nl::ChatFormat::ChatML, conv, false)) {
    all += p.text;
    if (p.trainable) trainable += p.text;
  }
  EXPECT_EQ(tok.decode(e.tokens), all);
  EXPECT_EQ(supervised_text(tok, e), trainable);
  EXPECT_NE(trainable.find("Hi there"), std::string::npos);
  EXPECT_NE(trainable.find("See you"), std::string::npos);
  EXPECT_EQ(trainable.find("Hello"), std::string::npos);
}

TEST(Dataset, TruncationKeepsTheStartAndCounts) {
  CharTokenizer tok;
  nl::DataOptions opt;
  opt.max_tokens = 4;
  nl::Dataset ds = parse("{\"text\": \"abcdef\"}\n{\"text\": \"ab\"}\n", tok, opt);
  ASSERT_EQ(ds.examples.size(), 2u);
  EXPECT_EQ(tok.decode(ds.examples[0].tokens), "<s>abc");
  EXPECT_EQ(tok.decode(ds.examples[1].tokens), "<s>ab</s>");
  EXPECT_EQ(ds.n_truncated, 1);
  EXPECT_EQ(ds.n_dropped_tokens, 4);  // "def" and EOS
}

TEST(Dataset, BlankLinesAreSkippedAndLinesCounted) {
  CharTokenizer tok;
  nl::Dataset ds = parse("\n{\"text\": \"a\"}\n   \n{\"text\": \"b\"}\r\n\n", tok);
  ASSERT_EQ(ds.examples.size(), 2u);
  EXPECT_EQ(ds.examples[0].line, 2);
  EXPECT_EQ(ds.examples[1].line, 4);
  EXPECT_EQ(ds.n_tokens(), 6);
  EXPECT_EQ(ds.n_supervised(), 4);
}

TEST(DatasetErrors, MalformedJsonNamesFileAndLine) {
  CharTokenizer tok;
  std::string err = error_of("{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n", tok);
  EXPECT_NE(err.find("d.jsonl:2"), std::string::npos) << err;
  EXPECT_NE(err.find("malformed JSON"), std::string::npos) << err;
}

// nlohmann refuses 1e400 with an out_of_range exception, not a parse error: it must still be
// an nl::Error naming the file and line, not an "internal error".
TEST(DatasetErrors, NumberTooLargeForADoubleNamesFileAndLine) {
  CharTokenizer tok;
  for (const char* bad : {"{\"text\": 1e400}", "{\"text\": \"a\", \"n\": -1e999}", "[1e309]"}) {
    std::string err = error_of(std::string("{\"text\": \"ok\"}\n") + bad + "\n", tok);
    EXPECT_NE(err.find("d.jsonl:2"), std::string::npos) << bad << ": " << err;
    EXPECT_NE(err.find("too large for a double"), std::string::npos) << bad << ": " << err;
    EXPECT_NE(err.find("quote it"), std::string::npos) << bad << ": " << err;
  }
}

TEST(DatasetErrors, EachBadLineIsAClearError) {
  CharTokenizer tok;
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"[1, 2]", "expected a JSON object"},
      {"{\"txt\": \"a\"}", "no known key"},
      {"{\"text\": \"a\", \"prompt\": \"b\", \"completion\": \"c\"}", "more than one format"},
      {"{\"text\": 5}", "\"text\" must be a string"},
      {"{\"prompt\": \"a\"}", "missing \"completion\""},
      {"{\"messages\": []}", "non-empty array"},
      {"{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}", "unknown role \"bot\""},
      {"{\"messages\": [{\"role\": \"user\"}]}", "needs both"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", "needs a chat template"},
  };
  for (const auto& c : cases) {
    std::string err = error_of(c.text, tok);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "input: " << c.text << "\nerror: " << err;
    EXPECT_NE(err.find("d.jsonl:"), std::string::npos) << err;
  }
}

TEST(DatasetErrors, EmptyDataSet) {
  CharTokenizer tok;
  std::string err = error_of("\n  \n", tok);
  EXPECT_NE(err.find("empty"), std::string::npos) << err;
}

TEST(DatasetErrors, NoSupervisedTokensIsAnErrorWhenBadLinesAreErrors) {
  CharTokenizer tok(true, /*has_eos=*/false);
  // An empty completion and no EOS: nothing to learn.
  std::string err = error_of("{\"prompt\": \"abc\", \"completion\": \"\"}", tok);
  EXPECT_NE(err.find("d.jsonl:1"), std::string::npos) << err;
  EXPECT_NE(err.find("no token to train on"), std::string::npos) << err;
  // The completion cut off by the cap.
  CharTokenizer tok2;
  nl::DataOptions opt;
  opt.max_tokens = 3;
  err = error_of("{\"prompt\": \"\", \"completion\": \"x\"}\n{\"prompt\": \"long prompt\", \"completion\": \"c\"}",
                 tok2, opt);
  EXPECT_NE(err.find("d.jsonl:2"), std::string::npos) << err;
  EXPECT_NE(err.find("--seq-len"), std::string::npos) << err;
  EXPECT_NE(err.find("prompt fills"), std::string::npos) << err;
  // A user with a chat without an assistant turn.
  nl::DataOptions chat;
  chat.chat_format = nl::ChatFormat::ChatML;
  err = error_of("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", tok2, chat);
  EXPECT_NE(err.find("no token to train on"), std::string::npos) << err;
}

TEST(DatasetErrors, BadOptions) {
  CharTokenizer tok;
  EXPECT_THROW(nl::parse_train_on("everything"), nl::Error);
  nl::DataOptions opt;
  opt.max_tokens = 1;
  EXPECT_NE(error_of("{\"text\": \"a\"}", tok, opt).find("--seq-len"), std::string::npos);
  EXPECT_THROW(nl::load_jsonl_dataset("/nonexistent/x.jsonl", tok, {}), nl::Error);
}

// By default bad lines never stop the data: they are counted by reason with their first
// line numbers, and the rest is kept.
TEST(DatasetSkips, BadLinesAreCountedByReasonAndTheRestKept) {
  CharTokenizer tok(true, /*has_eos=*/false);
  nl::DataOptions opt;
  opt.max_tokens = 6;
  nl::Dataset ds = parse("{\"text\": \"ok\"}\n"
                         "not json\n"
                         "{\"prompt\": \"abc\", \"completion\": \"\"}\n"
                         "{\"prompt\": \"long prompt\", \"completion\": \"c\"}\n"
                         "[1]\n"
                         "{oops\n"
                         "{\"prompt\": \"a\", \"completion\": \"b\"}\n",
                         tok, opt);
  ASSERT_EQ(ds.examples.size(), 2u);
  EXPECT_EQ(ds.examples[0].line, 1);
  EXPECT_EQ(ds.examples[1].line, 7);
  EXPECT_TRUE(ds.mixed_formats);
  EXPECT_EQ(ds.n_skipped(), 5);
  ASSERT_EQ(ds.skipped.size(), 4u);
  EXPECT_EQ(ds.skipped[0].reason, "of malformed JSON");
  EXPECT_EQ(ds.skipped[0].count, 2);
  EXPECT_EQ(ds.skipped[0].first_lines, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(ds.skipped[1].reason, "with no token to train on");
  EXPECT_EQ(ds.skipped[2].reason, "with no token to train on within --seq-len");
  EXPECT_EQ(ds.skipped[2].first_lines, (std::vector<int64_t>{4}));
  EXPECT_EQ(ds.skipped[3].reason, "that are not a JSON object");
  const std::string said = ds.describe_skipped();
  EXPECT_NE(said.find("2 lines of malformed JSON (lines 2, 6)"), std::string::npos) << said;
}

TEST(DatasetSkips, UnknownKeysAreIgnoredAndCounted) {
  CharTokenizer tok;
  nl::Dataset ds = parse("{\"text\": \"a\", \"id\": 1}\n{\"text\": \"b\", \"id\": 2, \"src\": \"x\"}\n"
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\", \"name\": \"u\"},"
                         " {\"role\": \"assistant\", \"content\": \"yo\"}]}\n",
                         tok, [] {
                           nl::DataOptions o;
                           o.chat_format = nl::ChatFormat::ChatML;
                           return o;
                         }());
  ASSERT_EQ(ds.examples.size(), 3u);
  EXPECT_EQ(ds.ignored_keys, (std::vector<std::pair<std::string, int64_t>>{{"id", 2}, {"src", 1}, {"messages[].name", 1}}));
  EXPECT_EQ(ds.describe_ignored_keys(), "\"id\" (2 lines), \"src\" (1 line), \"messages[].name\" (1 line)");
}

TEST(DatasetSkips, ByteOrderMarkAndJsonArrayFiles) {
  CharTokenizer tok;
  nl::Dataset bom = parse("\xEF\xBB\xBF{\"text\": \"a\"}\n", tok);
  EXPECT_TRUE(bom.byte_order_mark);
  ASSERT_EQ(bom.examples.size(), 1u);
  EXPECT_EQ(tok.decode(bom.examples[0].tokens), "<s>a</s>");

  nl::Dataset arr = parse("\xEF\xBB\xBF [ {\"text\": \"a\"},\n {\"prompt\": \"x\", \"completion\": \"y\"}, 5 ]", tok);
  EXPECT_TRUE(arr.json_array);
  ASSERT_EQ(arr.examples.size(), 2u);
  EXPECT_EQ(arr.examples[1].line, 2);  // the element's position
  ASSERT_EQ(arr.skipped.size(), 1u);
  EXPECT_EQ(arr.skipped[0].first_lines, (std::vector<int64_t>{3}));
  EXPECT_NE(arr.describe_skipped().find("element"), std::string::npos);
  EXPECT_NE(error_of("[{\"text\": \"a\"},", tok).find("not one valid JSON array"), std::string::npos);
}

TEST(DatasetSkips, LongExamplesTruncateSkipOrError) {
  CharTokenizer tok;
  const std::string text = "{\"text\": \"abcdef\"}\n{\"text\": \"ab\"}\n";
  nl::DataOptions opt;
  opt.max_tokens = 4;
  opt.long_examples = nl::LongExamples::Skip;
  nl::Dataset skip = parse(text, tok, opt);
  ASSERT_EQ(skip.examples.size(), 1u);
  EXPECT_EQ(skip.examples[0].line, 2);
  ASSERT_EQ(skip.skipped.size(), 1u);
  EXPECT_EQ(skip.skipped[0].reason, "longer than --seq-len (--long-examples skip)");
  opt.long_examples = nl::LongExamples::Error;
  std::string err;
  try {
    parse(text, tok, opt);
  } catch (const nl::Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("d.jsonl:1"), std::string::npos) << err;
  EXPECT_THROW(nl::parse_long_examples("cut"), nl::Error);
  EXPECT_THROW(nl::parse_bad_lines("ignore"), nl::Error);
}

// A line far longer than any --seq-len tokens can cover is cut before tokenizing: the result
// is the same as tokenizing it whole and keeping the first tokens.
TEST(DatasetSkips, AHugeLineIsCutBeforeTokenizingWithTheSameResult) {
  CharTokenizer tok;
  std::string huge(1 << 20, 'x');
  for (size_t i = 0; i < huge.size(); i += 7) huge[i] = 'y';
  nl::DataOptions opt;
  opt.max_tokens = 64;
  nl::Dataset ds = parse("{\"text\": \"" + huge + "\"}\n", tok, opt);
  ASSERT_EQ(ds.examples.size(), 1u);
  EXPECT_EQ(ds.n_truncated, 1);
  const std::vector<int32_t> whole = tok.encode(huge, true, true);
  EXPECT_EQ(ds.examples[0].tokens, std::vector<int32_t>(whole.begin(), whole.begin() + 64));
  // The supervised part of a prompt/completion beyond the cut is gone: nothing to train on.
  nl::Dataset none = parse("{\"prompt\": \"" + huge + "\", \"completion\": \"z\"}\n{\"text\": \"a\"}\n", tok, opt);
  ASSERT_EQ(none.skipped.size(), 1u);
  EXPECT_EQ(none.skipped[0].reason, "with no token to train on within --seq-len");
}

}  // namespace
