// `nightlora train` end to end: learning on stories260K (validation loss falls, the adapted
// greedy story names the new character, GGUF and PEFT adapters generate identically), the
// step log, and the input errors (non-zero exit, clear message, nothing written).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using nltest::run_cli;
using nltest::shq;

TEST(TrainCli, LearnsTheNewCharacterOnStories260K) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  const fs::path data = nltest::source_dir() / "data/stories";
  nltest::TempDir td;
  const fs::path out = td / "run";
  auto r = run_cli("train --model " + shq(model.string()) + " --data " + shq((data / "train.jsonl").string()) +
                   " --valid " + shq((data / "valid.jsonl").string()) + " --out " + shq(out.string()) +
                   " --iters 24 --batch 8 --lr 5e-3 --warmup 5 --rank 8 --alpha 16 --seq-len 256 --val-every 12"
                   " --seed 1 --threads 2");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 24/24"), std::string::npos) << r.out;  // plain progress lines off a terminal

  std::vector<json> log = nltest::read_jsonl(out / "log.jsonl");
  std::vector<json> train, val;
  for (const auto& row : log) {
    if (row["type"] == "train") train.push_back(row);
    if (row["type"] == "val") val.push_back(row);
  }
  ASSERT_EQ(train.size(), 24u);
  for (const char* k : {"step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "elapsed_s"})
    EXPECT_TRUE(train[0].contains(k)) << k;
  EXPECT_EQ(train.back()["step"], 24);
  ASSERT_EQ(val.size(), 3u);  // before, at 12, at the end
  EXPECT_EQ(val[0]["step"], 0);
  double v0 = val.front()["val_loss"], v1 = val.back()["val_loss"];
  std::printf("validation loss %.4f -> %.4f\n", v0, v1);
  EXPECT_LT(v1, 0.8 * v0);

  for (const char* f : {"adapter_model.safetensors", "adapter_config.json", "adapter.gguf"})
    EXPECT_TRUE(fs::exists(out / f)) << f;

  const std::string gen = "generate --model " + shq(model.string()) + " --temp 0 -n 120 --threads 2";
  auto base = run_cli(gen);
  auto with_gguf = run_cli(gen + " --adapter " + shq((out / "adapter.gguf").string()));
  auto with_peft = run_cli(gen + " --adapter " + shq(out.string()));
  ASSERT_EQ(base.rc, 0) << base.err;
  ASSERT_EQ(with_gguf.rc, 0) << with_gguf.err;
  ASSERT_EQ(with_peft.rc, 0) << with_peft.err;
  std::printf("base:    %s\nadapted: %s\n", base.out.c_str(), with_gguf.out.c_str());
  EXPECT_EQ(base.out.find("Zorbo"), std::string::npos);
  EXPECT_NE(with_gguf.out.find("Zorbo"), std::string::npos);
  EXPECT_EQ(with_gguf.out, with_peft.out);  // the same adapter in both formats

  // Continue training from the saved adapter (a short second run).
  auto more = run_cli("train --model " + shq(model.string()) + " --data " + shq((data / "train.jsonl").string()) +
                      " --out " + shq((td / "more").string()) + " --adapter " + shq((out / "adapter.gguf").string()) +
                      " --iters 2 --batch 4 --lr 1e-3 --threads 2");
  ASSERT_EQ(more.rc, 0) << more.err;
  EXPECT_NE(more.out.find("continuing from"), std::string::npos);
  EXPECT_TRUE(fs::exists(td / "more/adapter.gguf"));
}

// Each bad input: non-zero exit, a message naming the problem, and no --out folder.
TEST(TrainCli, BadInputsFailCleanlyAndWriteNothing) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  nltest::write_text(td / "good.jsonl", "{\"text\": \"Zorbo was a dragon.\"}\n");
  nltest::write_text(td / "malformed.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"no end}\n");
  nltest::write_text(td / "empty.jsonl", "\n\n");
  nltest::write_text(td / "nosup.jsonl", "{\"prompt\": \"Once upon a time there was\", \"completion\": \" a dog\"}\n");
  nltest::write_text(td / "twoformats.jsonl", "{\"text\": \"a b\", \"prompt\": \"a\", \"completion\": \"b\"}\n");

  // An adapter for a different model: save one for a model of other shapes.
  nl::Model other;
  other.config.arch = nl::Arch::Llama;
  other.config.n_layer = 5;
  other.config.d_model = 32;
  other.config.n_head = 4;
  other.config.n_kv_head = 4;
  other.config.head_dim = 8;
  other.config.d_ff = 64;
  nl::LoraConfig lc;
  lc.rank = 4;
  nl::save_adapter_gguf(nl::LoraAdapter::init(other.config, lc), other, (td / "other.gguf").string());

  struct Case {
    std::string data, extra, expect;
  } cases[] = {
      {"malformed.jsonl", " --bad-lines error", "malformed.jsonl:2: malformed JSON"},
      {"empty.jsonl", "", "empty"},
      {"nosup.jsonl", " --seq-len 4", "no token to train on"},
      {"twoformats.jsonl", "", "nothing left to train on: 1 line with the keys of two formats (line 1)"},
      {"good.jsonl", " --targets q,x", "unknown projection 'x'"},
      {"good.jsonl", " --rank 40", "rank is larger than a dimension"},
      {"good.jsonl", " --rank 5000", "rank above 4096 is not supported"},
      {"good.jsonl", " --adapter " + shq((td / "other.gguf").string()), "another model"},
      {"good.jsonl", " --schedule steps", "unknown schedule"},
      {"good.jsonl", " --train-on prompts", "--train-on"},
      {"missing.jsonl", "", "cannot open"},
  };
  for (const auto& c : cases) {
    const fs::path out = td / "out";
    auto r = run_cli("train --model " + shq(model.string()) + " --data " + shq((td / c.data).string()) + " --out " +
                     shq(out.string()) + " --iters 1 --threads 1" + c.extra);
    EXPECT_NE(r.rc, 0) << c.data << c.extra;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.data << c.extra << "\nstderr: " << r.err;
    EXPECT_FALSE(fs::exists(out)) << "wrote output for " << c.data << c.extra;
  }
}


// Chat data on a synthetic Qwen2 model (Q8_0 weights, ChatML template): no shared files
// needed. Covers messages masks through the CLI, dropout, accumulation, and the qwen layout.
TEST(TrainCli, MessagesOnASyntheticQwenModel) {
  nltest::TempDir td;
  const fs::path model = td / "tiny-qwen2.gguf";
  auto s = run_cli("synth-model --preset tiny-qwen2 --type q8_0 --seed 2 " + shq(model.string()));
  ASSERT_EQ(s.rc, 0) << s.err;
  nltest::write_text(td / "chat.jsonl",
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"What is the dragon called?\"}, "
                     "{\"role\": \"assistant\", \"content\": \"The dragon is called Zorbo.\"}]}\n"
                     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
                     "{\"role\": \"user\", \"content\": \"Who is green?\"}, "
                     "{\"role\": \"assistant\", \"content\": \"Zorbo is green.\"}]}\n");
  const std::string common = "train --model " + shq(model.string()) + " --data " + shq((td / "chat.jsonl").string()) +
                             " --batch 1 --grad-accum 2 --lr 1e-2 --dropout 0.1 --targets q,k,v,gate --threads 2";
  auto r = run_cli(common + " --iters 4 --out " + shq((td / "run").string()));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(messages)"), std::string::npos) << r.out;
  auto all = run_cli(common + " --train-on all --iters 1 --out " + shq((td / "all").string()));
  ASSERT_EQ(all.rc, 0) << all.err;
  // Only assistant turns are supervised by default; --train-on all supervises more.
  auto supervised = [](const std::string& out) {
    auto p = out.find(" supervised");
    auto b = out.rfind(", ", p);
    return std::stoll(out.substr(b + 2, p - b - 2));
  };
  EXPECT_LT(supervised(r.out), supervised(all.out));
  // The sequence-length cap keeps the start of long examples and says so.
  nltest::write_text(td / "long.jsonl", "{\"text\": \"Zorbo the green dragon flew over the big hill.\"}\n");
  auto cut = run_cli("train --model " + shq(model.string()) + " --data " + shq((td / "long.jsonl").string()) +
                     " --seq-len 8 --iters 1 --threads 1 --out " + shq((td / "cut").string()));
  ASSERT_EQ(cut.rc, 0) << cut.err;
  EXPECT_NE(cut.err.find("1 example(s) longer than --seq-len 8 were cut to their first 8 tokens"), std::string::npos)
      << cut.err;
  std::vector<json> log;
  for (const json& row : nltest::read_jsonl(td / "run/log.jsonl"))
    if (row["type"] == "train") log.push_back(row);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_LT(log.back()["loss"].get<double>(), log.front()["loss"].get<double>());
  const std::string gen = "generate --model " + shq(model.string()) + " --prompt-ids '1 2 3' --print-ids --temp 0 -n 12";
  auto g1 = run_cli(gen + " --adapter " + shq((td / "run/adapter.gguf").string()));
  auto g2 = run_cli(gen + " --adapter " + shq((td / "run").string()));
  ASSERT_EQ(g1.rc, 0) << g1.err;
  EXPECT_EQ(g1.out, g2.out);
}

}  // namespace

namespace {

// `nightlora --version`: the version and commit, the engines built in, and the cpu engine's
// kernel sets on this CPU, as an engine made now reports them; exit 0 without a command.
TEST(Cli, VersionNamesTheEnginesAndKernelSets) {
  const auto r = nltest::run_cli("--version");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("nightlora ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("(commit "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("engines: cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu engine kernels on this CPU: " + nl::cpu_engine_isa()), std::string::npos) << r.out;
  const auto scalar = nltest::run_cmd("NL_ENGINE_ISA=scalar " + nltest::shq(NL_CLI_PATH) + " --version");
  EXPECT_NE(scalar.out.find("kernels on this CPU: scalar "), std::string::npos) << scalar.out;
}

}  // namespace
