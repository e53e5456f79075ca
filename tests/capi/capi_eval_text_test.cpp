// nl_eval_text and nl_eval_text_file against `nightlora eval --text`: the same windows, token
// counts, loss and printed perplexity, on stories260K (skipped when ../shared is absent) and
// on a tiny synthetic model (with an adapter at a scale); the CLI's messages for bad options.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "capi_test_util.h"
#include "nightlora.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using capitest::cli_error;
using capitest::Model;
using nltest::run_cli;
using nltest::shq;

// The stories of data/stories/valid.jsonl as one text (about 2,700 tokens for stories260K).
std::string stories_text() {
  std::string text;
  for (const json& row : nltest::read_jsonl(nltest::source_dir() / "data/stories/valid.jsonl"))
    text += (text.empty() ? "" : "\n\n") + row["text"].get<std::string>();
  return text;
}

// One evaluation: the CLI's (JSON and printed) and the C API's on the file and on the string.
void expect_equal_to_cli(nl_model* m, const fs::path& model, const fs::path& text_file, int64_t seq_len,
                         int64_t stride, nl_adapter* adapter = nullptr, const std::string& adapter_flag = "") {
  SCOPED_TRACE("seq_len " + std::to_string(seq_len) + " stride " + std::to_string(stride));
  std::string args = "eval --threads 2 --model " + shq(model.string()) + " --text " + shq(text_file.string()) +
                     " --seq-len " + std::to_string(seq_len) + adapter_flag;
  if (stride > 0) args += " --stride " + std::to_string(stride);
  const auto cli_json = run_cli(args + " --json");
  ASSERT_EQ(cli_json.rc, 0) << cli_json.err;
  const json want = json::parse(cli_json.out);
  const auto cli_text = run_cli(args);
  ASSERT_EQ(cli_text.rc, 0) << cli_text.err;

  nl_eval_options o;
  nl_eval_options_init(&o);
  o.seq_len = seq_len;
  o.stride = stride;
  if (adapter) {
    o.adapters = &adapter;
    o.n_adapters = 1;
  }
  nl_eval_result from_file, from_string;
  ASSERT_EQ(nl_eval_text_file(m, text_file.c_str(), &o, &from_file), NL_OK) << nl_last_error();
  const std::string text = nltest::read_text(text_file);
  ASSERT_EQ(nl_eval_text(m, text.data(), text.size(), &o, &from_string), NL_OK) << nl_last_error();
  for (const nl_eval_result* r : {&from_file, &from_string}) {
    EXPECT_EQ(r->loss, want["loss"].get<double>());
    EXPECT_EQ(r->perplexity, want["perplexity"].get<double>());
    EXPECT_EQ(r->examples, want["windows"].get<int64_t>());
    EXPECT_EQ(r->tokens, want["tokens"].get<int64_t>());
    EXPECT_EQ(r->supervised_tokens, want["scored_tokens"].get<int64_t>());
    EXPECT_EQ(r->skipped, 0);
    // The figure the CLI prints.
    char line[96];
    std::snprintf(line, sizeof(line), "loss %.6f  perplexity %.4f\n", r->loss, r->perplexity);
    EXPECT_NE(cli_text.out.find(line), std::string::npos) << cli_text.out << " has no " << line;
  }
  EXPECT_GT(from_file.examples, 1) << "several windows";
}

TEST(CApiEvalText, EqualsTheCliOnStories260K) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  nltest::TempDir td;
  nltest::write_text(td / "stories.txt", stories_text());
  Model model(path);
  expect_equal_to_cli(model.m, path, td / "stories.txt", 64, 24);
  expect_equal_to_cli(model.m, path, td / "stories.txt", 96, 96);
  expect_equal_to_cli(model.m, path, td / "stories.txt", 128, 0);  // the default stride: half
}

TEST(CApiEvalText, EqualsTheCliOnASyntheticModelWithAnAdapter) {
  nltest::TempDir td;
  const fs::path path = capitest::synthetic_model(td.path);
  nltest::write_text(td / "stories.txt", stories_text());
  Model model(path);
  expect_equal_to_cli(model.m, path, td / "stories.txt", 48, 20);
  // An adapter at half its scale, as `--adapter DIR:0.5`.
  const json opts = {{"data", capitest::stories_data("train.jsonl")}, {"out", (td / "a").string()}, {"iters", 2},
                     {"batch", 2}, {"lr", 5e-2}, {"seq-len", 64}, {"threads", 2}, {"precision", "f32"},
                     {"plan-cache", "off"}};
  nl_train_result r;
  ASSERT_EQ(nl_train(model.m, opts.dump().c_str(), nullptr, &r), NL_OK) << nl_last_error();
  nl_adapter* a = nullptr;
  ASSERT_EQ(nl_adapter_load(model.m, (td / "a").c_str(), 0.5f, &a), NL_OK) << nl_last_error();
  expect_equal_to_cli(model.m, path, td / "stories.txt", 48, 20, a, " --adapter " + shq((td / "a").string() + ":0.5"));
  EXPECT_EQ(nl_adapter_free(a), NL_OK);

  // A byte-order mark is not text, in a string as in a file.
  nl_eval_result plain, marked;
  const std::string text = nltest::read_text(td / "stories.txt");
  const std::string with_bom = "\xEF\xBB\xBF" + text;
  ASSERT_EQ(nl_eval_text(model.m, text.data(), text.size(), nullptr, &plain), NL_OK) << nl_last_error();
  ASSERT_EQ(nl_eval_text(model.m, with_bom.data(), with_bom.size(), nullptr, &marked), NL_OK) << nl_last_error();
  EXPECT_EQ(plain.loss, marked.loss);
  EXPECT_EQ(plain.tokens, marked.tokens);
}

TEST(CApiEvalText, BadOptionsGiveTheCliMessages) {
  nltest::TempDir td;
  const fs::path path = capitest::synthetic_model(td.path);
  nltest::write_text(td / "story.txt", stories_text());
  Model model(path);
  const std::string m = "eval --model " + shq(path.string());
  nl_eval_options o;
  nl_eval_options_init(&o);
  nl_eval_result r;
  // A stride longer than the window.
  o.seq_len = 32;
  o.stride = 40;
  EXPECT_EQ(nl_eval_text_file(model.m, (td / "story.txt").c_str(), &o, &r), NL_ERR_BAD_INPUT);
  const auto cli_stride = run_cli(m + " --text " + shq((td / "story.txt").string()) + " --seq-len 32 --stride 40");
  EXPECT_EQ(cli_stride.rc, 1);
  EXPECT_EQ(std::string(nl_last_error()), cli_error(cli_stride));
  // A file that is not there.
  o.stride = 0;
  EXPECT_EQ(nl_eval_text_file(model.m, "/nonexistent/story.txt", &o, &r), NL_ERR_BAD_INPUT);
  const auto cli_missing = run_cli(m + " --text /nonexistent/story.txt");
  EXPECT_EQ(std::string(nl_last_error()), cli_error(cli_missing));
  // Too short a text; a negative stride; NULL where text is needed.
  EXPECT_EQ(nl_eval_text(model.m, "", 0, nullptr, &r), NL_ERR_BAD_INPUT);
  EXPECT_NE(std::string(nl_last_error()).find("perplexity needs at least 2"), std::string::npos) << nl_last_error();
  o.stride = -1;
  EXPECT_EQ(nl_eval_text(model.m, "Once upon a time", 16, &o, &r), NL_ERR_BAD_INPUT);
  EXPECT_NE(std::string(nl_last_error()).find("stride must be 0"), std::string::npos) << nl_last_error();
  EXPECT_EQ(nl_eval_text(model.m, nullptr, 5, nullptr, &r), NL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nl_eval_text_file(model.m, nullptr, nullptr, &r), NL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nl_eval_text(nullptr, "ab", 2, nullptr, &r), NL_ERR_INVALID_ARGUMENT);
  // A caller built against the first nl_eval_options (without stride) gets the default stride.
  nl_eval_options old;
  nl_eval_options_init(&old);
  old.struct_size = offsetof(nl_eval_options, stride);
  old.seq_len = 32;
  old.stride = 999;  // past its struct_size: not read
  nl_eval_result a, b;
  const std::string text = nltest::read_text(td / "story.txt");
  ASSERT_EQ(nl_eval_text(model.m, text.data(), text.size(), &old, &a), NL_OK) << nl_last_error();
  nl_eval_options half;
  nl_eval_options_init(&half);
  half.seq_len = 32;
  half.stride = 16;
  ASSERT_EQ(nl_eval_text(model.m, text.data(), text.size(), &half, &b), NL_OK) << nl_last_error();
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.examples, b.examples);
}

}  // namespace
