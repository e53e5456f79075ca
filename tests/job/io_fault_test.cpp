// I/O faults at every file call (fault_ops.h): EIO, ENOSPC and short writes, injected into
// each call of an atomic write, a checkpoint save, an adapter save, the nightly publish and a
// whole `train` run in turn. Each time: a clear nl::Error (the file and the system's reason)
// or, for a short write, a correct file; nothing lost; the previous state intact; and the
// same call without the fault then succeeds.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "crash_disk.h"
#include "fault_ops.h"
#include "nightlora/eval/nightly.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/lora.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/modelio/model.h"
#include "nightlora/train/training_job.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using faults::Fault;
using faults::FaultyFileOps;

struct Outcome {
  bool threw = false;
  std::string message;  // the nl::Error's, when it threw
  std::string call;     // the call that failed
};

// Runs `action` with `fault` at call 0, 1, 2, ... (each time after `setup`, without faults)
// until the action makes no call with that index; `check` judges each run. Returns the calls
// faulted.
int64_t every_call(Fault fault, const std::function<void()>& setup, const std::function<void()>& action,
                   const std::function<void(const Outcome&)>& check) {
  int64_t i = 0;
  for (;; ++i) {
    setup();
    FaultyFileOps ops(fault, i);
    Outcome o;
    {
      nl::ScopedFileOps use(ops);
      try {
        action();
      } catch (const nl::Error& e) {
        o.threw = true;
        o.message = e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not an nl::Error at call " << i << " (" << ops.what << "): " << e.what();
        o.threw = true;
      }
    }
    if (ops.calls() <= i) break;  // the action made fewer calls: every one was faulted
    if (!ops.injected()) continue;  // a short write fault on a call that is not a write
    o.call = ops.what;
    SCOPED_TRACE(std::string(faults::fault_name(fault)) + " at call " + std::to_string(i) + " (" + o.call + ")");
    check(o);
    if (::testing::Test::HasFailure()) break;  // one failing call is enough to read
  }
  return i;
}

std::string reason_of(Fault f) { return std::strerror(f == Fault::Enospc ? ENOSPC : EIO); }

bool no_temp_files_in(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".tmp") return false;
  return true;
}

TEST(IoFaults, AtomicWriteFailsCleanlyAtEveryCall) {
  crash::NoSyncFileOps no_sync;  // setups and retries need no durability: spare the disk
  nl::ScopedFileOps fast(no_sync);
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const std::string path = (tmp / "state.bin").string();
  const std::string v1 = "the previous state", v2(100000, 'n');
  for (Fault f : {Fault::Eio, Fault::Enospc, Fault::ShortWrite}) {
    const int64_t n = every_call(
        f, [&] { nl::write_file_checked(path, v1); }, [&] { nl::write_file_checked(path, v2); },
        [&](const Outcome& o) {
          const nl::CheckedRead r = nl::read_file_checked(path);
          ASSERT_TRUE(r.ok) << r.problem;
          EXPECT_TRUE(no_temp_files_in(tmp));
          if (f == Fault::ShortWrite) {
            EXPECT_FALSE(o.threw) << o.message;
            EXPECT_EQ(r.payload, v2);
            return;
          }
          ASSERT_TRUE(o.threw);
          EXPECT_NE(o.message.find(reason_of(f)), std::string::npos) << o.message;
          if (o.call.rfind("sync_dir", 0) == 0) {  // after the rename: the new file is in place, and the error says so
            EXPECT_EQ(r.payload, v2);
            EXPECT_NE(o.message.find("is in place"), std::string::npos) << o.message;
          } else {
            EXPECT_EQ(r.payload, v1) << "the previous file must be intact";
            EXPECT_NE(o.message.find("state.bin"), std::string::npos) << o.message;
          }
        });
    EXPECT_GE(n, 6) << faults::fault_name(f);  // create, 2 writes, fsync, close, rename, sync_dir
    nl::write_file_checked(path, v2);         // without the fault, the same write succeeds
    EXPECT_EQ(nl::read_file_checked_or_throw(path), v2);
  }
}

TEST(IoFaults, CheckpointSaveKeepsThePreviousCheckpoints) {
  crash::NoSyncFileOps no_sync;  // setups and retries need no durability: spare the disk
  nl::ScopedFileOps fast(no_sync);
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const fs::path dir = tmp / "checkpoints";
  for (Fault f : {Fault::Eio, Fault::Enospc, Fault::ShortWrite}) {
    every_call(
        f,
        [&] {
          fs::remove_all(dir);
          nl::CheckpointStore s(dir.string(), 2);
          s.save(1, "step one");
          s.save(2, "step two");
        },
        [&] { nl::CheckpointStore(dir.string(), 2).save(3, std::string(50000, '3')); },
        [&](const Outcome& o) {
          const std::optional<nl::LoadedCheckpoint> c = nl::CheckpointStore(dir.string(), 2).load_latest();
          ASSERT_TRUE(c.has_value());
          EXPECT_TRUE(c->skipped.empty()) << c->skipped.front();
          if (o.threw) {
            EXPECT_NE(o.message.find(reason_of(f)), std::string::npos) << o.message;
            if (o.call.rfind("sync_dir", 0) != 0) {
              EXPECT_EQ(c->step, 2) << "the previous checkpoint is the newest";
            }
            EXPECT_TRUE(fs::exists(dir / nl::CheckpointStore::file_name(2)));
          } else {
            EXPECT_EQ(c->step, 3);  // a short write, or a failed removal of the oldest (harmless, ignored)
            EXPECT_EQ(c->payload, std::string(50000, '3'));
          }
        });
  }
}

nl::LoraAdapter some_adapter(const nl::Model& m, uint64_t seed) {
  nl::LoraConfig lc;
  lc.rank = 2;
  lc.alpha = 4;
  lc.seed = seed;
  nl::LoraAdapter ad = nl::LoraAdapter::init(m.config, lc);
  uint32_t x = static_cast<uint32_t>(seed);
  for (auto& p : ad.pairs)
    for (auto& b : p.B) {
      x = x * 1664525u + 1013904223u;
      b = 0.3f * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
    }
  return ad;
}

const char* kIoFaultAdapterFiles[] = {"adapter.gguf", "adapter_model.safetensors", "adapter_config.json"};

void save_both(const nl::LoraAdapter& a, const nl::Model& m, const fs::path& dir) {
  nl::save_adapter_gguf(a, m, (dir / "adapter.gguf").string());
  nl::save_adapter_peft(a, m, dir.string());
}

TEST(IoFaults, AdapterSaveLeavesEveryFileComplete) {
  crash::NoSyncFileOps no_sync;  // setups and retries need no durability: spare the disk
  nl::ScopedFileOps fast(no_sync);
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  const std::unique_ptr<nl::Model> m = nl::Model::load(model_path.string());
  const nl::LoraAdapter a1 = some_adapter(*m, 1), a2 = some_adapter(*m, 2);
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  save_both(a1, *m, tmp / "ref1");
  save_both(a2, *m, tmp / "ref2");
  const fs::path dir = tmp / "out";
  for (Fault f : {Fault::Eio, Fault::Enospc, Fault::ShortWrite}) {
    every_call(
        f,
        [&] {
          fs::remove_all(dir);
          save_both(a1, *m, dir);
        },
        [&] { save_both(a2, *m, dir); },
        [&](const Outcome& o) {
          // Each file is one adapter's complete file (after a failure part-way the folder may
          // hold some files of each: the caller reports the error and writes them all again).
          for (const char* name : kIoFaultAdapterFiles) {
            const std::string have = nltest::read_text(dir / name);
            const bool old_one = have == nltest::read_text(tmp / "ref1" / name),
                       new_one = have == nltest::read_text(tmp / "ref2" / name);
            EXPECT_TRUE(old_one || new_one) << name << " is torn";
            if (!o.threw) { EXPECT_TRUE(new_one) << name; }
          }
          EXPECT_TRUE(no_temp_files_in(dir));
          if (f == Fault::ShortWrite) EXPECT_FALSE(o.threw) << o.message;
          else {
            ASSERT_TRUE(o.threw);
            EXPECT_NE(o.message.find(reason_of(f)), std::string::npos) << o.message;
          }
          EXPECT_NO_THROW(nl::load_adapter((dir / "adapter.gguf").string(), *m));
          EXPECT_NO_THROW(nl::load_adapter(dir.string(), *m));
        });
  }
}

TEST(IoFaults, NightlyPublishKeepsACompleteCurrentAdapter) {
  crash::NoSyncFileOps no_sync;  // setups and retries need no durability: spare the disk
  nl::ScopedFileOps fast(no_sync);
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  const std::unique_ptr<nl::Model> m = nl::Model::load(model_path.string());
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const fs::path out = tmp / "job", cand1 = out / "runs/0001/candidate", cand2 = out / "runs/0002/candidate";
  save_both(some_adapter(*m, 1), *m, cand1);
  save_both(some_adapter(*m, 2), *m, cand2);
  auto files = [](const fs::path& d) {
    std::vector<std::string> v;
    for (const char* f : kIoFaultAdapterFiles) v.push_back(fs::exists(d / f) ? nltest::read_text(d / f) : "");
    return v;
  };
  const auto want1 = files(cand1), want2 = files(cand2);
  for (Fault f : {Fault::Eio, Fault::Enospc, Fault::ShortWrite}) {
    every_call(
        f,
        [&] {
          fs::remove_all(out / "adapters");
          fs::remove(out / "current");
          nl::nightly_publish(out.string(), "0001", cand1.string());
        },
        [&] { nl::nightly_publish(out.string(), "0002", cand2.string()); },
        [&](const Outcome& o) {
          const auto have = files(nl::nightly_current_adapter(out.string()));
          EXPECT_TRUE(have == want1 || have == want2) << "OUT/current is not a complete adapter";
          if (o.threw) EXPECT_NE(o.message.find(reason_of(f)), std::string::npos) << o.message;
          else EXPECT_EQ(have, want2);
          // The job publishes again when it continues: that completes it.
          nl::nightly_publish(out.string(), "0002", cand2.string());
          EXPECT_EQ(files(nl::nightly_current_adapter(out.string())), want2);
        });
  }
}

class QuietJob : public nl::TrainingJobOutput {};

nl::TrainingJobOptions tiny_run(const fs::path& model, const fs::path& out) {
  nl::TrainingJobOptions o;
  o.model = model.string();
  o.data = (nltest::source_dir() / "data/stories/train.jsonl").string();
  o.out = out.string();
  o.iters = 3;
  o.batch = 2;
  o.seq_len = 32;
  o.rank = 2;
  o.alpha = 4;
  o.lr = 5e-3;
  o.seed = 7;
  o.threads = 1;
  o.save_every = 1;
  o.save_every_sec = 0;
  o.keep = 1;
  o.precision = "f32";
  o.plan_cache = "off";
  return o;
}

std::vector<std::string> adapter_files(const fs::path& out) {
  std::vector<std::string> v;
  for (const char* f : kIoFaultAdapterFiles) v.push_back(fs::exists(out / f) ? nltest::read_text(out / f) : "(missing)");
  return v;
}

// ENOSPC at every call of a whole run: a clear error, and the same command then finishes
// with the adapter of a run that never failed.
TEST(IoFaults, TrainDiskFullAtEveryCallThenResumesToTheSameAdapter) {
  crash::NoSyncFileOps no_sync;  // setups and retries need no durability: spare the disk
  nl::ScopedFileOps fast(no_sync);
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  QuietJob quiet;
  ASSERT_TRUE(nl::run_training_job(tiny_run(model, tmp / "reference"), quiet).finished);
  const auto want = adapter_files(tmp / "reference");
  const fs::path out = tmp / "out";
  int64_t errors = 0;
  const int64_t n = every_call(
      Fault::Enospc, [&] { fs::remove_all(out); }, [&] { nl::run_training_job(tiny_run(model, out), quiet); },
      [&](const Outcome& o) {
        if (o.threw) {
          ++errors;
          EXPECT_NE(o.message.find(reason_of(Fault::Enospc)), std::string::npos) << o.message;
        }
        const nl::TrainingJobResult r = nl::run_training_job(tiny_run(model, out), quiet);
        EXPECT_TRUE(r.finished);
        EXPECT_EQ(adapter_files(out), want) << "the run after the full disk ends with another adapter";
      });
  std::printf("[ io faults ] train: ENOSPC at each of %lld calls, %lld reported as errors (the rest: removals of what "
              "is no longer needed, which may fail)\n",
              static_cast<long long>(n), static_cast<long long>(errors));
  EXPECT_GT(errors, n / 2);
}

}  // namespace
