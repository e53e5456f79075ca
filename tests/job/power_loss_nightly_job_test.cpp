// Power loss during a whole `nightly` job (crash_disk.h), not only its publish: night 2 of a
// user's job (data, training in the child process, candidate, evaluation, gate, publish,
// seal) recorded call by call, the training child's files entering the record as they appear
// (RecordingWithOutsideWrites: durable at the child's exit, its logs unsynced; the child's
// own crash points are PowerLoss.Train's). After a power cut at each chosen point: OUT/current
// is night 1's adapter or night 2's, whole (never torn, never another one), every state file
// of the job parses, and the next nightly job completes, with night 2's adapter published.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "crash_disk.h"
#include "nightlora/eval/nightly.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kNightlyJobAdapterFiles[] = {"adapter_model.safetensors", "adapter_config.json"};

std::vector<std::string> current_adapter_files(const std::string& dir) {
  std::vector<std::string> v;
  for (const char* f : kNightlyJobAdapterFiles) {
    const fs::path p = fs::path(dir) / f;
    v.push_back(!dir.empty() && fs::exists(p) ? nltest::read_text(p) : std::string("(missing)"));
  }
  return v;
}

// A user's items for the generic task: stories about their dragon, an hour apart.
void write_stories(const fs::path& file, int first, int n) {
  static const char* kDoings[] = {"liked to fly over the hills", "found a shiny red ball", "played with a little cat",
                                  "ate a big cake", "sang a happy song", "saw a big tree"};
  std::string s;
  for (int i = first; i < first + n; ++i)
    s += json({{"text", std::string("Once upon a time, there was a little dragon named Zorbo. Zorbo ") + kDoings[i % 6] + "."},
               {"timestamp", 1800000000 + 3600 * i}})
             .dump() +
         "\n";
  nltest::write_text(file, s);
}

// A night as short as it can be and still do every step: 2 training steps (a checkpoint after
// each), 2 held-out items, a gate that publishes any finite candidate, one adapter kept (the
// old one is pruned when the new one is published).
nl::NightlyOptions night(const fs::path& model, const fs::path& data, const fs::path& out) {
  nl::NightlyOptions o;
  o.exe = NL_CLI_PATH;
  o.model = model.string();
  o.user_data = data.string();
  o.out = out.string();
  o.task = "generic";
  o.holdout = 2;
  o.gate.min_heldout = 2;
  o.gate.min_improvement = -100;
  o.gate.resamples = 200;
  o.keep_adapters = 1;
  o.iters = 2;
  o.save_every = 1;
  o.batch = 2;
  o.rank = 2;
  o.alpha = 4;
  o.lr = 1e-2;
  o.seq_len = 48;
  o.seed = 5;
  o.threads = 1;
  o.report = false;
  o.extra_train_args = {"--normal-priority"};  // idle priority would starve the child on a busy machine
  return o;
}

// Every JSON state file of the job parses (run.json, trained.json, eval.json, decision.json,
// failures.json, abandoned.json, the adapters' configs); "" when they all do.
std::string unparsable_state(const fs::path& out) {
  for (auto it = fs::recursive_directory_iterator(out); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file() || it->path().extension() != ".json") continue;
    if (json::parse(nltest::read_text(it->path()), nullptr, false).is_discarded()) return it->path().string();
  }
  return "";
}

TEST(PowerLoss, NightlyJobEveryCrashPointKeepsAWholeCurrentAdapterAndContinues) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  if (!fs::exists(NL_CLI_PATH)) GTEST_SKIP() << "the nightlora executable is not built: " << NL_CLI_PATH;
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path), data = tmp / "app", disk = tmp / "disk", out = disk / "job";
  fs::create_directories(data);
  fs::create_directories(disk);
  crash::NoSyncFileOps no_sync;
  nl::ScopedFileOps fast(no_sync);
  const nl::NightlyLog quiet = [](const std::string&) {};

  // Night 1, not recorded: publishes adapters/0001. Night 2 gets a day's more stories.
  write_stories(data / "day1.jsonl", 0, 8);
  ASSERT_EQ(nl::run_nightly(night(model, data, out), quiet).outcome, nl::NightlyOutcome::Published);
  const std::vector<std::string> old_files = current_adapter_files(nl::nightly_current_adapter(out.string()));
  write_stories(data / "day2.jsonl", 8, 4);

  // Night 2, recorded. Logs (train's log.jsonl, the child's output) are never synced.
  const crash::DiskModel before(disk.string());
  crash::RecordingWithOutsideWrites rec(disk.string(), [](const std::string& p) {
    return !(p.size() > 4 && (p.compare(p.size() - 4, 4, ".out") == 0 || p.compare(p.size() - 6, 6, ".jsonl") == 0) &&
             p.find("/train") != std::string::npos);
  });
  const auto t0 = std::chrono::steady_clock::now();
  {
    nl::ScopedFileOps use(rec);
    const nl::NightlyResult r = nl::run_nightly(night(model, data, out), quiet);
    ASSERT_EQ(r.outcome, nl::NightlyOutcome::Published) << r.reason;
    rec.catch_up();
  }
  const double night_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(rec.outside.empty()) << "a write outside the job's folder: " << rec.outside.front();
  const std::vector<std::string> new_files = current_adapter_files(nl::nightly_current_adapter(out.string()));
  ASSERT_NE(new_files, old_files);
  ASSERT_FALSE(fs::exists(out / "adapters/0001")) << "one adapter kept: night 1's is pruned";

  // Crash points: every call but the bulk of the data writes (of a run of writes, creates
  // and closes, every 4th), so a whole night fits CI; every rename, link, folder sync, fsync,
  // mkdir, unlink and promise is a crash point, and so is the call after it. The training
  // child's files appear at once, at its exit (before it or after it, not in between).
  const std::vector<crash::Op>& ops = rec.ops;
  auto bulk = [](crash::OpKind k) {
    return k == crash::OpKind::Write || k == crash::OpKind::Create || k == crash::OpKind::Close ||
           k == crash::OpKind::OpenAppend;
  };
  int64_t nights = 0, sealed = 0;
  const crash::ReplayStats st = crash::replay_every_prefix(
      before, ops,
      [&]() -> std::vector<std::string> {
        std::vector<std::string> bad;
        // Right after the cut: current is one whole adapter, night 1's or night 2's.
        const std::vector<std::string> now = current_adapter_files(nl::nightly_current_adapter(out.string()));
        if (now != old_files && now != new_files) bad.push_back("OUT/current is neither night 1's nor night 2's whole adapter");
        if (const std::string f = unparsable_state(out); !f.empty()) bad.push_back("a state file does not parse: " + f);
        // The next job: continues night 2's run (or, when it was sealed, has nothing to redo).
        if (fs::exists(out / "runs/0002/decision.json")) {
          ++sealed;
          if (now != new_files) bad.push_back("run 0002 is sealed and OUT/current is not its adapter");
          return bad;
        }
        ++nights;
        try {
          const nl::NightlyResult r = nl::run_nightly(night(model, data, out), quiet);
          if (r.outcome != nl::NightlyOutcome::Published || fs::path(r.run_dir).filename() != "0002")
            bad.push_back(std::string("the next job did not publish run 0002: ") + nl::nightly_outcome_name(r.outcome) +
                          " " + r.run_dir + ": " + r.reason);
          else if (current_adapter_files(nl::nightly_current_adapter(out.string())) != new_files)
            bad.push_back("the next job published an adapter other than the uninterrupted night's");
        } catch (const std::exception& e) {
          bad.push_back(std::string("the next job failed: ") + e.what());
        }
        return bad;
      },
      [&](size_t k) {
        if (k == 0 || k == ops.size()) return true;
        if (rec.from_outside(k - 1) && rec.from_outside(k)) return false;  // inside the child's exit
        return !bulk(ops[k - 1].kind) || !bulk(ops[k].kind) || k % 4 == 0;
      });
  std::printf("[ power loss ] nightly job: %lld calls recorded (%lld for the training child's files, %lld promised), "
              "%lld of %lld crash points replayed x 3 kinds = %lld disks, %lld distinct: %lld next jobs run, %lld sealed "
              "(a night takes %.2f s)\n",
              static_cast<long long>(ops.size()), static_cast<long long>(rec.absorbed), static_cast<long long>(st.promises),
              static_cast<long long>(st.points), static_cast<long long>(ops.size() + 1), static_cast<long long>(st.disks),
              static_cast<long long>(st.distinct), static_cast<long long>(nights), static_cast<long long>(sealed), night_s);
  EXPECT_GT(rec.absorbed, 10);
  EXPECT_GT(nights, 10);
  for (const std::string& f : st.failures) ADD_FAILURE() << f;
}

}  // namespace
