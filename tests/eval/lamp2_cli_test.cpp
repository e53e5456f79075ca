// The LaMP-2 commands end to end on stories260K: make-lamp2 -> lamp2-data -> train (a few
// steps) -> lamp2-eval (score and generate, with and without the adapter) -> lamp2-compare.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nightlora/eval/lamp2.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nltest::run_cli;
using nltest::shq;
using json = nlohmann::json;

namespace {

TEST(Lamp2Cli, MakeDataTrainEvaluateCompare) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const fs::path data = td / "lamp";
  auto made = run_cli("make-lamp2 --users 2 --items-per-user 12 --questions-per-user 4 --seed 3 --split time --out " +
                      shq(data.string()));
  ASSERT_EQ(made.rc, 0) << made.err;
  for (const char* f : {"questions.json", "outputs.json", "README.md"}) EXPECT_TRUE(fs::exists(data / f)) << f;
  const std::string q = shq((data / "questions.json").string()), o = shq((data / "outputs.json").string());

  // One user's training data, OPPU style with 2 retrieved earlier items.
  auto made_data = run_cli("lamp2-data --questions " + q + " --user u1 --retrieve 2 --out " + shq((td / "u1.jsonl").string()));
  ASSERT_EQ(made_data.rc, 0) << made_data.err;
  EXPECT_NE(made_data.out.find("12 examples for user u1 (time split"), std::string::npos) << made_data.out;
  const std::string jsonl = nltest::read_text(td / "u1.jsonl");
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 12);
  EXPECT_NE(jsonl.find("the tag for the movie: "), std::string::npos);

  // The trainer reads it as prompt/completion data.
  auto trained = run_cli("train --model " + shq(model.string()) + " --data " + shq((td / "u1.jsonl").string()) +
                         " --out " + shq((td / "adapter").string()) + " --iters 3 --batch 4 --rank 4 --seq-len 512 --threads 2");
  ASSERT_EQ(trained.rc, 0) << trained.out << trained.err;

  // Evaluate the base model, then the adapter, on user u1, as JSON with every item.
  const std::string eval = "lamp2-eval --model " + shq(model.string()) + " --questions " + q + " --outputs " + o +
                           " --user u1 --retrieve 2 --threads 2 --json";
  auto base = run_cli(eval);
  ASSERT_EQ(base.rc, 0) << base.err;
  const json jb = json::parse(base.out);
  EXPECT_EQ(jb["mode"], "score");
  EXPECT_EQ(jb["overall"]["n"], 4);
  ASSERT_EQ(jb["items"].size(), 4u);
  EXPECT_EQ(jb["items"][0]["id"], "u1-q0");
  EXPECT_EQ(jb["items"][0]["tag_logprob"].size(), 15u);
  EXPECT_EQ(jb["users"].size(), 1u);
  int correct = 0;
  for (const auto& it : jb["items"]) correct += it["correct"].get<bool>();
  EXPECT_EQ(jb["overall"]["correct"], correct);
  nltest::write_text(td / "base.json", base.out);

  auto adapted = run_cli(eval + " --adapter " + shq((td / "adapter").string()) + " --predictions " +
                         shq((td / "preds.json").string()));
  ASSERT_EQ(adapted.rc, 0) << adapted.err;
  nltest::write_text(td / "adapted.json", adapted.out);
  // The predictions file is in LaMP's output format and loads as such.
  const nl::Lamp2Outputs preds = nl::load_lamp2_outputs((td / "preds.json").string());
  EXPECT_EQ(preds.golds.size(), 4u);
  EXPECT_EQ(preds.task, "LaMP_2");

  auto cmp = run_cli("lamp2-compare --a " + shq((td / "base.json").string()) + " --b " + shq((td / "adapted.json").string()) +
                     " --unit item --resamples 200 --seed 1");
  ASSERT_EQ(cmp.rc, 0) << cmp.err;
  EXPECT_NE(cmp.out.find("paired comparison over 4 items"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("95% bootstrap CI"), std::string::npos) << cmp.out;

  // Generation mode and the plain-text table, over all users.
  auto gen = run_cli("lamp2-eval --model " + shq(model.string()) + " --questions " + q + " --outputs " + o +
                     " --mode generate --max-new-tokens 4 --threads 2");
  ASSERT_EQ(gen.rc, 0) << gen.err;
  EXPECT_NE(gen.out.find("LaMP-2 generate, retrieve 0"), std::string::npos) << gen.out;
  EXPECT_NE(gen.out.find("overall"), std::string::npos) << gen.out;
  EXPECT_NE(gen.out.find("unparseable outputs:"), std::string::npos) << gen.out;
}

TEST(Lamp2Cli, ClearErrors) {
  nltest::TempDir td;
  nltest::write_text(td / "bad.json", "[{\"id\": 1,");
  auto bad = run_cli("lamp2-data --questions " + shq((td / "bad.json").string()) + " --user 1 --out " +
                     shq((td / "x.jsonl").string()));
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("bad.json: malformed JSON at byte"), std::string::npos) << bad.err;

  auto made = run_cli("make-lamp2 --users 1 --items-per-user 3 --questions-per-user 1 --out " + shq((td / "d").string()));
  ASSERT_EQ(made.rc, 0) << made.err;
  auto nouser = run_cli("lamp2-data --questions " + shq((td / "d" / "questions.json").string()) + " --user u9 --out " +
                        shq((td / "x.jsonl").string()));
  EXPECT_EQ(nouser.rc, 1);
  EXPECT_NE(nouser.err.find("no question of user \"u9\""), std::string::npos) << nouser.err;
  auto split = run_cli("lamp2-data --questions " + shq((td / "d" / "questions.json").string()) +
                       " --user u0 --split time --out " + shq((td / "x.jsonl").string()));
  EXPECT_EQ(split.rc, 1);
  EXPECT_NE(split.err.find("no \"date\""), std::string::npos) << split.err;
  auto badsplit = run_cli("make-lamp2 --users 1 --items-per-user 3 --questions-per-user 1 --split weekly --out " +
                          shq((td / "e").string()));
  EXPECT_EQ(badsplit.rc, 1);
  EXPECT_NE(badsplit.err.find("unknown split 'weekly'"), std::string::npos) << badsplit.err;
}

}  // namespace
