// `--config FILE` (cli/config_file.h) through the real CLI: every kind of option from a TOML
// file, the command line winning over it, run.json recording the merged values, and bad files
// as clear errors naming the file and line.
#include <gtest/gtest.h>

#include "nightlora/modelio/synth.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nltest::run_cli;
using nltest::shq;

namespace {

// A tiny synthetic model and three training examples.
struct TinyModel {
  nltest::TempDir td;
  TinyModel() {
    nl::SynthOptions so;
    so.preset = "tiny-qwen2";
    so.type = nl::QType::Q8_0;
    so.seed = 3;
    so.tokenizer = "generated";
    nl::synth_model((td / "model.gguf").string(), so);
    nltest::write_text(td / "train.jsonl",
                       "{\"prompt\": \"The dragon is called\", \"completion\": \" Zorbo.\"}\n"
                       "{\"prompt\": \"Zorbo is\", \"completion\": \" green.\"}\n"
                       "{\"prompt\": \"Zorbo flew\", \"completion\": \" over the big hill.\"}\n");
  }
  std::string model() const { return (td / "model.gguf").string(); }
  std::string data() const { return (td / "train.jsonl").string(); }
};

TEST(ConfigFile, SetsEveryKindOfOptionAndTheCommandLineWins) {
  TinyModel s;
  nltest::write_text(s.td / "run.toml",
                     "# a nightlora train config\n"
                     "model = \"" + s.model() + "\"\n"
                     "data = \"" + s.data() + "\"\n"
                     "iters = 3\n"                 // integer
                     "lr = 1e-2\n"                 // float
                     "alpha = 8\n"                 // an integer for a float option
                     "rank = 4\n"                  // overridden below
                     "targets = \"q,v\"\n"         // text
                     "batch = 2\n"
                     "precision = \"f32\"\n"
                     "quiet = true\n"              // a flag
                     "resume = false\n"            // a flag left off
                     "long-examples = \"skip\"\n");  // a checked value
  const fs::path out = s.td / "out";
  nltest::CmdResult r = run_cli("train --config " + shq((s.td / "run.toml").string()) + " --rank 2 -t 1 --out " +
                                shq(out.string()));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("step 1/3"), std::string::npos) << "quiet = true should leave out the step lines:\n" << r.out;

  const nlohmann::json run = nlohmann::json::parse(nltest::read_text(out / "run.json"));
  EXPECT_EQ(run.at("config_file"), fs::absolute(s.td / "run.toml").string());
  const nlohmann::json& o = run.at("options");
  EXPECT_EQ(o.at("rank"), 2) << "the command line wins over the file";
  EXPECT_EQ(o.at("iters"), 3);
  EXPECT_DOUBLE_EQ(o.at("lr").get<double>(), 1e-2);
  EXPECT_DOUBLE_EQ(o.at("alpha").get<double>(), 8.0);
  EXPECT_EQ(o.at("targets"), "q,v");
  EXPECT_EQ(o.at("quiet"), true);
  EXPECT_EQ(o.at("resume"), false);
  EXPECT_EQ(o.at("long-examples"), "skip");
  EXPECT_EQ(o.at("threads"), 1);
  EXPECT_EQ(o.at("seq-len"), 512) << "options in neither place are recorded with their defaults";
  EXPECT_EQ(o.at("model"), s.model());
  EXPECT_EQ(o.at("log-every"), 1);
  // And they were used: the adapter has the merged shape.
  const nlohmann::json cfg = nlohmann::json::parse(nltest::read_text(out / "adapter_config.json"));
  EXPECT_EQ(cfg.at("r"), 2);
  EXPECT_DOUBLE_EQ(cfg.at("lora_alpha").get<double>(), 8.0);
  EXPECT_EQ(cfg.at("target_modules").size(), 2u) << cfg.dump();
  EXPECT_EQ(nltest::read_jsonl(out / "log.jsonl", "train").size(), 3u);
}

// Each bad file is refused before anything runs, naming the file, the line and the fix.
TEST(ConfigFile, BadKeysTypesAndValuesNameTheFileAndLine) {
  nltest::TempDir td;
  const fs::path file = td / "bad.toml";
  struct Case {
    std::string body;
    std::vector<std::string> said;
  };
  const std::vector<Case> cases = {
      {"iters = 2\nrnak = 4\n", {"bad.toml:2", "unknown key `rnak`", "Did you mean 'rank'?"}},
      {"rank = \"four\"\n", {"bad.toml:1", "`rank` must be an integer, not string"}},
      {"\n\nrank = 1.5\n", {"bad.toml:3", "`rank` must be an integer"}},
      {"lr = \"fast\"\n", {"bad.toml:1", "`lr` must be a number"}},
      {"data = 5\n", {"bad.toml:1", "`data` must be a string"}},
      {"quiet = \"yes\"\n", {"bad.toml:1", "`quiet` must be true or false"}},
      {"long-examples = \"cut\"\n", {"bad.toml:1", "long-examples", "cut not in {truncate,skip,error}"}},
      {"threads = -2\n", {"bad.toml:1", "threads"}},
      {"[lora]\nrank = 4\n", {"bad.toml:1", "unknown key `lora`", "without [sections]"}},
      {"iters = 2\nrank = \n", {"bad.toml:2: is not valid TOML", "2 | rank ="}},
      {"rank = 4\nmodel = 'm\x9b.gguf'\n", {"bad.toml:2", "is not valid UTF-8 (byte 19)"}},  // toml11 would read out of bounds
  };
  for (const Case& c : cases) {
    nltest::write_text(file, c.body);
    nltest::CmdResult r = run_cli("train --config " + shq(file.string()) + " --model m.gguf --data d.jsonl --out o");
    EXPECT_EQ(r.rc, 1) << c.body;
    for (const std::string& piece : c.said) EXPECT_NE(r.err.find(piece), std::string::npos) << c.body << r.err;
  }
  // A key that only nightly has is unknown to train.
  nltest::write_text(file, "holdout = 3\n");
  EXPECT_NE(run_cli("train --config " + shq(file.string()) + " --model m --data d --out o").err.find("unknown key `holdout`"),
            std::string::npos);
  // The required options may come from the file, but must come from somewhere.
  nltest::write_text(file, "rank = 4\n");
  nltest::CmdResult r = run_cli("train --config " + shq(file.string()) + " --data d.jsonl --out o");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("train --model: is required"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--config"), std::string::npos) << r.err;
}

TEST(ConfigFile, NightlyTakesItsOptionsAndTrainArgsFromTheFile) {
  nltest::TempDir td;
  const fs::path file = td / "night.toml";
  // Everything from the file: the job looks for the model the file names, which is missing,
  // so nothing trains.
  nltest::write_text(file, "model = \"" + (td / "m.gguf").string() + "\"\nuser-data = \"" +
                               (td / "no-such-data").string() + "\"\nout = \"" + (td / "job").string() +
                               "\"\nholdout = 4\nno-report = true\n"
                               "train-args = [\"--window\", \"23:00-07:00\"]\n");
  nltest::CmdResult r = run_cli("nightly --config " + shq(file.string()));
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find((td / "m.gguf").string() + ": --model does not exist"), std::string::npos) << r.err;
  // Types and unknown keys as for train.
  nltest::write_text(file, "holdout = \"four\"\n");
  r = run_cli("nightly --config " + shq(file.string()));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("night.toml:1: `holdout` must be an integer"), std::string::npos) << r.err;
  nltest::write_text(file, "train-args = \"--window 23:00-07:00\"\n");
  r = run_cli("nightly --config " + shq(file.string()));
  EXPECT_NE(r.err.find("night.toml:1: `train-args` must be an array of strings"), std::string::npos) << r.err;
  nltest::write_text(file, "\nrank = 4\nlearning-rate = 0.1\n");
  r = run_cli("nightly --config " + shq(file.string()));
  EXPECT_NE(r.err.find("night.toml:3: unknown key `learning-rate`"), std::string::npos) << r.err;
}

}  // namespace
