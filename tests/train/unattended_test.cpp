// Training left alone overnight (issue 36): the divergence guard, the best-validation adapter
// and early stopping, one trainer per folder, data that never stops a run, the exact data
// identity, options that mean what they say, and one test per exit code.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nightlora/data/data_fingerprint.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/job/exit_codes.h"
#include "nightlora/modelio/gguf.h"
#include "nightlora/modelio/safetensors.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using nltest::run_cli;
using nltest::shq;

std::vector<json> rows_of(const std::vector<json>& log, const std::string& type) {
  std::vector<json> out;
  for (const json& r : log)
    if (r.value("type", "") == type) out.push_back(r);
  return out;
}

bool all_finite(const uint8_t* p, size_t n_floats) {
  for (size_t i = 0; i < n_floats; ++i) {
    float x;
    std::memcpy(&x, p + 4 * i, 4);
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// The files under `dir` that hold a NaN or an infinity: every f32 tensor of every safetensors
// and GGUF file, and the adapter and moments of the newest checkpoint of each checkpoints/.
std::vector<std::string> files_with_non_finite_values(const fs::path& dir) {
  std::vector<std::string> bad;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string(), ext = e.path().extension().string();
    if (e.is_directory() && name == "checkpoints") {
      auto latest = nl::CheckpointStore(e.path().string()).load_latest();
      if (!latest) continue;
      const nl::Checkpoint ck = nl::decode_checkpoint(latest->payload, latest->path);
      if (!ck.state.adapter.all_finite() || !ck.state.adam_m.all_finite() || !ck.state.adam_v.all_finite())
        bad.push_back(latest->path);
    } else if (ext == ".safetensors") {
      auto f = nl::SafetensorsFile::open(e.path().string());
      for (const auto& t : f->tensors())
        if (t.dtype == nl::QType::F32 && !all_finite(t.data, static_cast<size_t>(t.n_elements())))
          bad.push_back(e.path().string() + ": " + t.name);
    } else if (ext == ".gguf") {
      auto g = nl::GgufFile::open(e.path().string());
      for (const auto& t : g->tensors())
        if (t.type == nl::QType::F32 && !all_finite(t.data, static_cast<size_t>(t.n_elements())))
          bad.push_back(e.path().string() + ": " + t.name);
    }
  }
  return bad;
}

struct Stories {
  fs::path model, data;
  bool ok = false;
  Stories() {
    if (nltest::shared_models_dir().empty()) return;
    const fs::path m = nltest::shared_models_dir() / "stories260K/stories260K.gguf";
    if (!fs::exists(m)) return;
    model = m;
    data = nltest::source_dir() / "data/stories";
    ok = true;
  }
  std::string train(const fs::path& out, const std::string& extra) const {
    return "train --model " + shq(model.string()) + " --data " + shq((data / "train.jsonl").string()) + " --out " +
           shq(out.string()) + " --batch 4 --seq-len 128 --threads 2 " + extra;
  }
};

#define NEED_STORIES(s)                                                              \
  Stories s;                                                                         \
  if (!s.ok) GTEST_SKIP() << "../shared/models/stories260K is absent: skipped";

// --- the divergence guard ------------------------------------------------------------------

TEST(DivergenceGuard, AHugeLearningRateEndsAsDivergedAndWritesNothingNonFinite) {
  NEED_STORIES(s);
  for (const char* opts : {"--lr 1e9", "--lr 1e30 --clip 0"}) {
    nltest::TempDir td;
    const fs::path out = td / "run";
    auto r = run_cli(s.train(out, std::string(opts) + " --iters 30 --save-every 5"));
    std::string all = r.out + r.err;
    // Either the guard gave up (exit 3, no adapter), or a rollback recovered and the run ended
    // with a finite adapter.
    if (r.rc == nl::exit_code::kDiverged) {
      EXPECT_NE(all.find("diverged"), std::string::npos) << all;
      EXPECT_NE(all.find("smaller --lr"), std::string::npos) << all;
      EXPECT_FALSE(fs::exists(out / "adapter_model.safetensors")) << opts;
      EXPECT_FALSE(fs::exists(out / "adapter.gguf")) << opts;
    } else {
      ASSERT_EQ(r.rc, 0) << opts << "\n" << all;
    }
    const std::vector<json> log = nltest::read_jsonl(out / "log.jsonl");
    EXPECT_FALSE(rows_of(log, "rollback").empty()) << opts;
    bool skipped = false;
    for (const json& t : rows_of(log, "train")) skipped |= t.value("skipped", false);
    EXPECT_TRUE(skipped) << opts;
    if (r.rc == nl::exit_code::kDiverged) {
      EXPECT_EQ(rows_of(log, "diverged").size(), 1u) << opts;
    }
    const json run = json::parse(nltest::read_text(out / "run.json"));
    EXPECT_NE(run.dump().find(r.rc == nl::exit_code::kDiverged ? "diverged" : "finished"), std::string::npos);
    EXPECT_TRUE(files_with_non_finite_values(out).empty()) << opts;
    // The report shows it: the events table lists the rollbacks (and the divergence), and no
    // non-finite loss is presented as a final loss of 0.
    auto rep = run_cli("report " + shq(out.string()) + " --out " + shq((td / "r.html").string()));
    ASSERT_EQ(rep.rc, 0) << rep.err;
    const std::string html = nltest::read_text(td / "r.html");
    EXPECT_NE(html.find("rollback"), std::string::npos) << opts;
    if (r.rc == nl::exit_code::kDiverged) {
      EXPECT_NE(html.find("diverged"), std::string::npos) << opts;
    }
    // The checkpoints decode and resume: a re-run of a diverged run diverges again the same way.
    if (r.rc == nl::exit_code::kDiverged) {
      auto again = run_cli(s.train(out, std::string(opts) + " --iters 30 --save-every 5"));
      EXPECT_EQ(again.rc, nl::exit_code::kDiverged) << again.out << again.err;
    }
  }
}

TEST(DivergenceGuard, AHealthyRunIsNeverTouched) {
  NEED_STORIES(s);
  nltest::TempDir td;
  auto r = run_cli(s.train(td / "run", "--iters 12 --lr 5e-3"));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const std::vector<json> log = nltest::read_jsonl(td / "run/log.jsonl");
  EXPECT_TRUE(rows_of(log, "rollback").empty());
  for (const json& t : rows_of(log, "train")) EXPECT_FALSE(t.value("skipped", false)) << t.dump();
  ASSERT_EQ(rows_of(log, "session").size(), 1u);
  EXPECT_EQ(rows_of(log, "session")[0]["resumed"], false);
}

// --- the best-validation adapter and early stopping -----------------------------------------

// A learning rate that warms up to far too high a value: the validation loss first falls,
// then rises. The adapter kept is the one of the best validation, and it is byte for byte the
// adapter of a run that stopped at that step (a constant schedule after warmup does not depend
// on the run's length).
TEST(BestAdapter, KeepsTheBestValidationStepNotTheLast) {
  NEED_STORIES(s);
  nltest::TempDir td;
  auto cmd = [&](const fs::path& out, int iters) {
    return "train --model " + shq(s.model.string()) + " --data " + shq((s.data / "train.jsonl").string()) +
           " --valid " + shq((s.data / "valid.jsonl").string()) + " --out " + shq(out.string()) +
           " --batch 4 --seq-len 128 --threads 2 --schedule constant --lr 5e-2 --warmup 8 --val-every 1"
           " --spike-factor 0 --iters " +
           std::to_string(iters);
  };
  auto r = run_cli(cmd(td / "long", 16));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const std::vector<json> val = nltest::read_jsonl(td / "long/log.jsonl", "val");
  ASSERT_EQ(val.size(), 17u);
  int64_t best = 0;
  for (const json& v : val)
    if (v["val_loss"].get<double>() < val[best]["val_loss"].get<double>()) best = v["step"];
  std::printf("validation loss: first %.4f, best %.4f at step %lld, last %.4f\n", val.front()["val_loss"].get<double>(),
              val[best]["val_loss"].get<double>(), static_cast<long long>(best), val.back()["val_loss"].get<double>());
  ASSERT_GT(best, 0) << "the schedule should improve validation at first";
  ASSERT_LT(best, 16) << "the schedule should make validation worse at the end";
  const json run = json::parse(nltest::read_text(td / "long/run.json"));
  EXPECT_EQ(run["kept_adapter"]["step"], best) << run.dump(1);
  EXPECT_NE(r.out.find("kept the adapter of step " + std::to_string(best)), std::string::npos) << r.out;

  auto shorter = run_cli(cmd(td / "short", static_cast<int>(best)));
  ASSERT_EQ(shorter.rc, 0) << shorter.err;
  EXPECT_EQ(nltest::read_text(td / "long/adapter_model.safetensors"),
            nltest::read_text(td / "short/adapter_model.safetensors"));

  // Early stopping: after 2 validations without improvement the run ends, exit 0, the best
  // adapter written.
  auto early = run_cli(cmd(td / "early", 16) + " --early-stop 2");
  ASSERT_EQ(early.rc, 0) << early.out << early.err;
  const std::vector<json> elog = nltest::read_jsonl(td / "early/log.jsonl");
  ASSERT_EQ(rows_of(elog, "early_stop").size(), 1u);
  EXPECT_EQ(rows_of(elog, "early_stop")[0]["step"], best + 2);
  EXPECT_EQ(nltest::read_text(td / "early/adapter_model.safetensors"),
            nltest::read_text(td / "short/adapter_model.safetensors"));
  // A re-run of an early-stopped run trains no further.
  auto again = run_cli(cmd(td / "early", 16) + " --early-stop 2");
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(nltest::read_jsonl(td / "early/log.jsonl", "train").size(), rows_of(elog, "train").size());
}

// --- one trainer per folder ------------------------------------------------------------------

pid_t spawn_cli(const std::string& args, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string cmd = "exec " + shq(NL_CLI_PATH) + " " + args + " > " + shq(log.string()) + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

bool wait_for_text(const fs::path& file, const std::string& text, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (fs::exists(file) && nltest::read_text(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(FolderLock, ASecondTrainerRefusesAtOnceAndAKilledOneLeavesNoStaleLock) {
  NEED_STORIES(s);
  nltest::TempDir td;
  const fs::path out = td / "run";
  // The first waits for a time window that is closed now (a fake clock at 12:00).
  const std::string waiting = s.train(out, "--iters 4 --background --window 23:00-23:30 --fake-clock 12:00,1");
  const pid_t first = spawn_cli(waiting, td / "first.log");
  ASSERT_TRUE(wait_for_text(td / "first.log", "waiting", 60)) << nltest::read_text(td / "first.log");

  const auto t0 = std::chrono::steady_clock::now();
  auto second = run_cli(s.train(out, "--iters 4"));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(second.rc, nl::exit_code::kBusy) << second.out << second.err;
  EXPECT_NE(second.err.find("process " + std::to_string(first)), std::string::npos) << second.err;
  EXPECT_EQ(second.out.find("model:"), std::string::npos) << "refused before loading anything: " << second.out;
  std::printf("the second trainer refused after %.2f s\n", took);

  ::kill(first, SIGKILL);
  int st = 0;
  ::waitpid(first, &st, 0);
  auto third = run_cli(s.train(out, "--iters 4"));
  EXPECT_EQ(third.rc, 0) << third.out << third.err;
}

// --- data that never stops a run --------------------------------------------------------------

TEST(DataHandling, ExtraKeysBomArraysAndLongExamplesTrainOnTheRest) {
  NEED_STORIES(s);
  nltest::TempDir td;
  std::string long_prompt(4000, 'a');
  for (size_t i = 0; i < long_prompt.size(); i += 5) long_prompt[i] = ' ';
  // JSONL with a BOM, an extra key on every line, one malformed line, one prompt that fills
  // --seq-len, one empty completion without EOS effect... and good lines.
  nltest::write_text(td / "mixed.jsonl",
                     "\xEF\xBB\xBF{\"text\": \"Zorbo the dragon went to the park.\", \"id\": 1}\n"
                     "{\"prompt\": \"" + long_prompt + "\", \"completion\": \" Zorbo.\", \"id\": 2}\n"
                     "{\"text\": \"unterminated\n"
                     "{\"prompt\": \"Who is green?\", \"completion\": \" Zorbo is green.\", \"id\": 4, \"source\": \"x\"}\n");
  auto r = run_cli("train --model " + shq(s.model.string()) + " --data " + shq((td / "mixed.jsonl").string()) +
                   " --out " + shq((td / "a").string()) + " --iters 2 --batch 2 --seq-len 64 --threads 2");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("byte-order mark"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"id\" (3 lines)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"source\" (1 line)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("2 left out"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("malformed JSON (line 3)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no token to train on within --seq-len (line 2)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("2 examples"), std::string::npos) << r.out;
  const json run = json::parse(nltest::read_text(td / "a/run.json"));
  EXPECT_EQ(run["data_counts"]["train"]["examples"], 2);
  EXPECT_EQ(run["data_counts"]["train"]["ignored_keys"]["id"], 3);

  // One JSON array holding the same kind of objects.
  nltest::write_text(td / "array.json",
                     "[{\"text\": \"Zorbo is a dragon.\"},\n {\"prompt\": \"Zorbo is\", \"completion\": \" green.\"}]\n");
  auto arr = run_cli("train --model " + shq(s.model.string()) + " --data " + shq((td / "array.json").string()) +
                     " --out " + shq((td / "b").string()) + " --iters 1 --batch 2 --threads 2");
  ASSERT_EQ(arr.rc, 0) << arr.out << arr.err;
  EXPECT_NE(arr.out.find("2 examples (mixed formats"), std::string::npos) << arr.out;

  // Over-long examples: skipped on request, an error on request.
  const std::string story = "{\"text\": \"" + std::string(3000, 'z') + "\"}\n{\"text\": \"Zorbo flew.\"}\n";
  nltest::write_text(td / "long.jsonl", story);
  const std::string base = "train --model " + shq(s.model.string()) + " --data " + shq((td / "long.jsonl").string()) +
                           " --iters 1 --batch 1 --seq-len 32 --threads 2 --out ";
  auto skip = run_cli(base + shq((td / "c").string()) + " --long-examples skip");
  ASSERT_EQ(skip.rc, 0) << skip.err;
  EXPECT_NE(skip.err.find("longer than --seq-len (--long-examples skip) (line 1)"), std::string::npos) << skip.err;
  auto error = run_cli(base + shq((td / "d").string()) + " --long-examples error");
  EXPECT_EQ(error.rc, nl::exit_code::kBadInput);
  EXPECT_NE(error.err.find("long.jsonl:1"), std::string::npos) << error.err;
  EXPECT_FALSE(fs::exists(td / "d"));
  auto truncate = run_cli(base + shq((td / "e").string()));
  ASSERT_EQ(truncate.rc, 0) << truncate.err;
  EXPECT_NE(truncate.err.find("were cut to their first 32 tokens"), std::string::npos) << truncate.err;

  // Nothing left: an error saying why.
  nltest::write_text(td / "none.jsonl", "{\"txt\": \"a\"}\nnot json\n");
  auto none = run_cli("train --model " + shq(s.model.string()) + " --data " + shq((td / "none.jsonl").string()) +
                      " --out " + shq((td / "f").string()) + " --iters 1 --threads 2");
  EXPECT_EQ(none.rc, nl::exit_code::kBadInput);
  EXPECT_NE(none.err.find("nothing left to train on"), std::string::npos) << none.err;
  EXPECT_FALSE(fs::exists(td / "f"));
}

// --- exact data identity -----------------------------------------------------------------------

TEST(DataIdentity, OneByteAnywhereChangesTheFingerprint) {
  nltest::TempDir td;
  std::string bytes(12 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>('a' + (i * 7919) % 26);
  nltest::write_text(td / "d.jsonl", bytes);
  const std::string before = nl::fingerprint_data_file((td / "d.jsonl").string());
  for (size_t at : {size_t{0}, size_t{4} << 20 | 100 << 10, bytes.size() / 2 + 3, bytes.size() - 1}) {
    std::string changed = bytes;
    changed[at] = static_cast<char>(changed[at] ^ 1);
    nltest::write_text(td / "d.jsonl", changed);
    EXPECT_NE(nl::fingerprint_data_file((td / "d.jsonl").string()), before) << "byte " << at;
  }
  nltest::write_text(td / "d.jsonl", bytes);
  EXPECT_EQ(nl::fingerprint_data_file((td / "d.jsonl").string()), before);
}

TEST(DataIdentity, ResumeRefusesDataChangedByOneByte) {
  NEED_STORIES(s);
  nltest::TempDir td;
  std::string data = nltest::read_text(s.data / "train.jsonl");
  nltest::write_text(td / "train.jsonl", data);
  const std::string cmd = "train --model " + shq(s.model.string()) + " --data " + shq((td / "train.jsonl").string()) +
                          " --out " + shq((td / "run").string()) + " --iters 6 --batch 4 --seq-len 128 --threads 2";
  auto first = run_cli(cmd + " --max-steps 2");
  ASSERT_EQ(first.rc, nl::exit_code::kStopped) << first.out << first.err;
  const size_t at = data.size() - 10;  // far from the start: in the last line
  data[at] = data[at] == 'x' ? 'y' : 'x';
  nltest::write_text(td / "train.jsonl", data);
  auto resumed = run_cli(cmd);
  EXPECT_EQ(resumed.rc, nl::exit_code::kBadInput);
  EXPECT_NE(resumed.err.find("different run"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("data: checkpoint \"bytes:"), std::string::npos) << resumed.err;
}

// --- options that mean what they say -------------------------------------------------------

TEST(Options, NonsenseIsRefusedBeforeAnyWork) {
  NEED_STORIES(s);
  nltest::TempDir td;
  struct Case {
    const char* opts;
    const char* expect;
  } cases[] = {{"--alpha 0", "--alpha 0"},
               {"--clip -1", "--clip -1"},
               {"--dropout 1", "--dropout 1"},
               {"--early-stop 2", "needs --valid"},
               {"--max-bad-steps 0", "--max-bad-steps"},
               {"--spike-factor 0.5", "--spike-factor"}};
  for (const Case& c : cases) {
    auto r = run_cli(s.train(td / "x", std::string("--iters 2 ") + c.opts));
    EXPECT_EQ(r.rc, nl::exit_code::kBadInput) << c.opts;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.opts << ": " << r.err;
    EXPECT_EQ(r.out.find("model:"), std::string::npos) << c.opts << ": refused before loading";
    EXPECT_FALSE(fs::exists(td / "x")) << c.opts;
  }
  // Legal but almost surely not meant: a warning, and the run goes on.
  auto warm = run_cli(s.train(td / "w", "--iters 3 --warmup 100"));
  EXPECT_EQ(warm.rc, 0) << warm.err;
  EXPECT_NE(warm.err.find("--warmup 100 is longer than the run's 3 steps"), std::string::npos) << warm.err;
}

TEST(Options, ContinuingAnAdapterRefusesOtherLoraSettingsAndRecordsTheRealOnes) {
  NEED_STORIES(s);
  nltest::TempDir td;
  auto first = run_cli(s.train(td / "a", "--iters 2 --rank 4 --alpha 8 --targets q,v"));
  ASSERT_EQ(first.rc, 0) << first.err;
  const std::string cont = s.train(td / "b", "--iters 2 --adapter " + shq((td / "a").string()));
  auto refused = run_cli(cont + " --rank 16 --targets q,k,v");
  EXPECT_EQ(refused.rc, nl::exit_code::kBadInput);
  EXPECT_NE(refused.err.find("--rank 16 (the adapter's is 4)"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--targets q,k,v (the adapter's are q,v)"), std::string::npos) << refused.err;
  auto same = run_cli(cont + " --rank 4");
  ASSERT_EQ(same.rc, 0) << same.err;
  const json run = json::parse(nltest::read_text(td / "b/run.json"));
  EXPECT_EQ(run["config"]["rank"], 4);
  EXPECT_EQ(run["config"]["alpha"], 8);
  EXPECT_EQ(run["config"]["targets"], "q,v");
}

// --- exit codes: one test per row of the table -----------------------------------------------

TEST(ExitCodes, FinishedBadInputStoppedAndBusyAreDistinct) {
  NEED_STORIES(s);
  nltest::TempDir td;
  EXPECT_EQ(run_cli(s.train(td / "done", "--iters 1")).rc, nl::exit_code::kFinished);
  EXPECT_EQ(run_cli(s.train(td / "bad", "--iters 1 --lr -1")).rc, nl::exit_code::kBadInput);
  EXPECT_EQ(run_cli(s.train(td / "bad2", "--iters 1 --no-such-option")).rc, nl::exit_code::kBadInput);
  EXPECT_EQ(run_cli(s.train(td / "stop", "--iters 3 --max-steps 1")).rc, nl::exit_code::kStopped);
  auto bg = run_cli(s.train(td / "wall", "--iters 50 --background --max-wall 0.001 --normal-priority"));
  EXPECT_EQ(bg.rc, nl::exit_code::kStopped) << bg.out << bg.err;
  auto help = run_cli("train --help");
  EXPECT_EQ(help.rc, 0);
  for (const char* row : {"0    finished", "1    bad input", "2    internal error", "3    diverged", "4    busy",
                          "75   stopped, resumable", "128+N"})
    EXPECT_NE(help.out.find(row), std::string::npos) << row;
}

TEST(ExitCodes, EachStopSignalSavesAndExits128PlusTheSignal) {
  NEED_STORIES(s);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    nltest::TempDir td;
    const fs::path out = td / "run";
    // Background mode waiting for a closed window: the signal arrives while it waits.
    const pid_t pid = spawn_cli(s.train(out, "--iters 4 --background --window 23:00-23:30 --fake-clock 12:00,1"),
                                td / "log");
    ASSERT_TRUE(wait_for_text(td / "log", "waiting", 60)) << nltest::read_text(td / "log");
    ::kill(pid, sig);
    int st = 0;
    ::waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(st), nl::exit_code::signal_code(sig)) << nltest::read_text(td / "log");
    EXPECT_NE(nltest::read_text(td / "log").find("run the same command again"), std::string::npos);
    EXPECT_FALSE(fs::is_empty(out / "checkpoints"));
  }
}

}  // namespace
