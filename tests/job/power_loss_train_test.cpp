// Power loss at every point of a `train` run with checkpoints, best-validation adapters and
// the final adapters (crash_disk.h): after each, nothing promised is lost or torn, the run
// resumes, and it ends with the bytes of a run that was never interrupted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "crash_disk.h"
#include "nightlora/train/training_job.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

class Quiet : public nl::TrainingJobOutput {};

// A short run that still writes everything `train` writes: checkpoints (every 2 steps, 1
// kept, so the older one is deleted), validation with a best adapter (best/step-N folders
// replaced as the loss improves), the log, run.json, the precision plan, the final adapters.
nl::TrainingJobOptions small_run(const fs::path& model, const fs::path& out) {
  nl::TrainingJobOptions o;
  o.model = model.string();
  o.data = (nltest::source_dir() / "data/stories/train.jsonl").string();
  o.valid = (nltest::source_dir() / "data/stories/valid.jsonl").string();
  o.out = out.string();
  o.iters = 4;
  o.batch = 2;
  o.seq_len = 32;
  o.rank = 2;
  o.alpha = 4;
  o.lr = 5e-3;
  o.seed = 7;
  o.lora_seed = 3;
  o.threads = 1;
  o.val_every = 2;
  o.save_every = 2;
  o.save_every_sec = 0;
  o.keep = 1;
  o.precision = "f32";  // no calibration: the plan is still written
  o.plan_cache = "off";
  return o;
}

const char* kAdapterFiles[] = {"adapter_model.safetensors", "adapter_config.json", "adapter.gguf"};

std::vector<std::string> adapter_bytes(const fs::path& out) {
  std::vector<std::string> v;
  for (const char* f : kAdapterFiles) v.push_back(fs::exists(out / f) ? nltest::read_text(out / f) : std::string("(missing)"));
  return v;
}

TEST(PowerLoss, TrainEveryCrashPointResumesToTheSameAdapter) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  Quiet quiet;
  crash::NoSyncFileOps no_sync;  // the runs below need no durability: spare the disk
  nl::ScopedFileOps fast(no_sync);

  // The uninterrupted run.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(nl::run_training_job(small_run(model, tmp / "reference"), quiet).finished);
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<std::string> want = adapter_bytes(tmp / "reference");

  // The same run, recorded. Everything it writes lives under `disk`.
  const fs::path disk = tmp / "disk", out = disk / "out";
  fs::create_directories(disk);
  const crash::DiskModel before(disk.string());
  crash::RecordingFileOps rec(disk.string());
  {
    nl::ScopedFileOps use(rec);
    ASSERT_TRUE(nl::run_training_job(small_run(model, out), quiet).finished);
  }
  EXPECT_TRUE(rec.outside.empty()) << "a write outside the run folder: " << rec.outside.front();
  ASSERT_EQ(adapter_bytes(out), want) << "the recorded run differs from the reference run";

  int64_t resumes = 0;
  const crash::ReplayStats st = crash::replay_every_prefix(before, rec.ops, [&]() -> std::vector<std::string> {
    ++resumes;
    try {
      const nl::TrainingJobResult r = nl::run_training_job(small_run(model, out), quiet);
      if (!r.finished) return {"the resumed run did not finish: " + r.stop_reason};
    } catch (const std::exception& e) {
      return {std::string("the run does not resume: ") + e.what()};
    }
    if (adapter_bytes(out) != want) return {"the resumed run's adapter differs from the uninterrupted run's"};
    return {};
  });
  std::printf("[ power loss ] train: %lld calls recorded (%lld promised files), %lld crash points replayed x 3 kinds "
              "= %lld disks, %lld distinct disks resumed (a run takes %.2f s)\n",
              static_cast<long long>(rec.ops.size()), static_cast<long long>(st.promises),
              static_cast<long long>(st.points), static_cast<long long>(st.disks), static_cast<long long>(st.distinct),
              run_s);
  EXPECT_EQ(st.points, static_cast<int64_t>(rec.ops.size()) + 1);
  EXPECT_GT(st.promises, 8);  // checkpoints, best adapters, run.json, the plan, the final adapters
  for (const std::string& f : st.failures) ADD_FAILURE() << f;
}

}  // namespace
