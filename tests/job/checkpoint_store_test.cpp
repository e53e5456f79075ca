// The checkpoint folder: keep-last-K, damaged checkpoints skipped for the previous good one,
// all-damaged refused, leftovers of killed writes cleaned, a full disk losing nothing.
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "nightlora/job/atomic_file.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/job/stop_signals.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nltest::TempDir;

std::string payload_of(int64_t step) { return "state at step " + std::to_string(step) + std::string(200, 'x'); }

TEST(CheckpointStore, KeepsTheNewestK) {
  TempDir t;
  nl::CheckpointStore store((t / "ckpt").string(), 3);
  EXPECT_FALSE(store.load_latest()) << "a fresh folder: start from scratch";
  for (int64_t s : {10, 20, 30, 40, 50}) store.save(s, payload_of(s));
  auto all = store.list();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].step, 30);
  EXPECT_EQ(all[2].step, 50);
  auto l = store.load_latest();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->step, 50);
  EXPECT_EQ(l->payload, payload_of(50));
  EXPECT_TRUE(l->skipped.empty());
  // Steps sort numerically, not by text.
  store.save(1000, payload_of(1000));
  EXPECT_EQ(store.load_latest()->step, 1000);
}

TEST(CheckpointStore, DamagedNewestFallsBackToThePreviousGoodOne) {
  TempDir t;
  nl::CheckpointStore store(t.path.string(), 3);
  for (int64_t s : {1, 2, 3}) store.save(s, payload_of(s));
  // Step 3 truncated (a copy cut short), step 2 bit-flipped.
  std::string p3 = (t / nl::CheckpointStore::file_name(3)).string();
  fs::resize_file(p3, fs::file_size(p3) / 2);
  std::string p2 = (t / nl::CheckpointStore::file_name(2)).string();
  std::string b = nl::read_file(p2);
  b[5] ^= 0x10;
  nltest::write_text(p2, b);
  auto l = store.load_latest();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->step, 1);
  EXPECT_EQ(l->payload, payload_of(1));
  ASSERT_EQ(l->skipped.size(), 2u);
  EXPECT_NE(l->skipped[0].find(nl::CheckpointStore::file_name(3)), std::string::npos) << l->skipped[0];
  EXPECT_NE(l->skipped[1].find("checksum mismatch"), std::string::npos) << l->skipped[1];
  // Nothing was deleted: the damaged files stay for inspection.
  EXPECT_EQ(store.list().size(), 3u);
}

TEST(CheckpointStore, AllDamagedIsAClearErrorNotAFreshStart) {
  TempDir t;
  nl::CheckpointStore store(t.path.string(), 2);
  store.save(7, payload_of(7));
  nltest::write_text(t / nl::CheckpointStore::file_name(7), "garbage");
  try {
    store.load_latest();
    FAIL() << "damaged checkpoints accepted";
  } catch (const nl::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("all 1 checkpoints are damaged"), std::string::npos) << m;
    EXPECT_NE(m.find("start the run over"), std::string::npos) << m;
  }
}

TEST(CheckpointStore, LeftoversOfAKilledWriteAreRemoved) {
  TempDir t;
  {
    nl::CheckpointStore store(t.path.string(), 2);
    store.save(5, payload_of(5));
  }
  nltest::write_text(t / (nl::CheckpointStore::file_name(6) + ".tmp"), "half a checkpoint");
  nltest::write_text(t / "notes.txt", "not ours");
  nl::CheckpointStore again(t.path.string(), 2);
  EXPECT_FALSE(fs::exists(t / (nl::CheckpointStore::file_name(6) + ".tmp")));
  EXPECT_TRUE(fs::exists(t / "notes.txt")) << "files that are not checkpoints are left alone";
  EXPECT_EQ(again.load_latest()->step, 5);
}

TEST(CheckpointStore, FullDiskDuringASaveKeepsEveryPreviousCheckpoint) {
  TempDir t;
  fs::create_directories(t / "small");
  if (::mount("tmpfs", (t / "small").c_str(), "tmpfs", 0, "size=64k") != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root); AtomicFile.WriteErrorPartWayKeepsThePreviousFile covers write errors";
  struct Unmount {
    fs::path p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{t / "small"};
  nl::CheckpointStore store((t / "small").string(), 2);
  store.save(1, std::string(10000, 'a'));
  store.save(2, std::string(10000, 'b'));
  EXPECT_THROW(store.save(3, std::string(100000, 'c')), nl::Error);
  auto all = store.list();
  ASSERT_EQ(all.size(), 2u) << "the failed save must not prune the older checkpoints";
  auto l = store.load_latest();
  EXPECT_EQ(l->step, 2);
  EXPECT_EQ(l->payload, std::string(10000, 'b'));
  EXPECT_TRUE(l->skipped.empty());
}

TEST(StopSignals, TermAsksToStopAndSecondIntKills) {
  {
    nl::StopSignals stop;
    EXPECT_FALSE(stop.requested());
    ::raise(SIGTERM);
    EXPECT_TRUE(stop.requested());
    EXPECT_EQ(stop.signal(), SIGTERM);
  }
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    nl::StopSignals stop;
    ::raise(SIGINT);
    if (!stop.requested()) ::_exit(3);
    ::raise(SIGINT);  // the second Ctrl-C ends the process
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit code " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

}  // namespace
