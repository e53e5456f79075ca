// The power-loss replayer (crash_disk.h) finds the ordering bugs it is there to find: each
// test below writes a file the wrong way through nl::file_ops() and expects the replay to
// say so; the right way (nl::write_file_atomic) replays clean.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "crash_disk.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// Records `writer` run on an empty folder, then replays every crash point of it.
template <class Writer>
crash::ReplayStats record_and_replay(const fs::path& root, Writer writer) {
  fs::create_directories(root);
  const crash::DiskModel before(root.string());
  crash::RecordingFileOps rec(root.string());
  {
    nl::ScopedFileOps use(rec);
    writer();
  }
  EXPECT_TRUE(rec.outside.empty());
  return crash::replay_every_prefix(before, rec.ops, [] { return std::vector<std::string>(); });
}

bool any_contains(const std::vector<std::string>& v, const std::string& what) {
  for (const std::string& s : v)
    if (s.find(what) != std::string::npos) return true;
  return false;
}

// A writer with the steps of an atomic write, each of which a test may leave out.
void write_by_hand(const std::string& path, const std::string& bytes, bool sync_data, bool sync_folder) {
  nl::FileOps& ops = nl::file_ops();
  const int fd = ops.create(path + ".tmp");
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ops.write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  if (sync_data) { ASSERT_EQ(ops.fsync(fd), 0); }
  ASSERT_EQ(ops.close(fd), 0);
  ASSERT_EQ(ops.rename(path + ".tmp", path), 0);
  if (sync_folder) { ASSERT_EQ(ops.sync_dir(nl::parent_folder(path)), 0); }
  ops.promised(path);
}

TEST(CrashDisk, AtomicWritesReplayClean) {
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const fs::path root = tmp / "disk";
  const crash::ReplayStats st = record_and_replay(root, [&] {
    nl::make_dirs((root / "a/b").string());
    nl::write_file_atomic((root / "a/b/state.json").string(), "{\"v\": 1}\n");
    nl::write_file_checked((root / "a/b/state.json").string(), "{\"v\": 2}\n");
    nl::write_file_atomic((root / "a/other").string(), std::string(5000, 'x'));
  });
  EXPECT_EQ(st.promises, 3);
  EXPECT_GT(st.points, 20);
  for (const std::string& f : st.failures) ADD_FAILURE() << f;
}

TEST(CrashDisk, FindsARenameBeforeTheDataIsSynced) {
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const fs::path root = tmp / "disk";
  const crash::ReplayStats st =
      record_and_replay(root, [&] { write_by_hand((root / "ckpt").string(), "complete checkpoint", false, true); });
  EXPECT_TRUE(any_contains(st.failures, "torn: " + (root / "ckpt").string())) << st.failures.size();
}

TEST(CrashDisk, FindsARenameWhoseFolderIsNotSynced) {
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const fs::path root = tmp / "disk";
  const crash::ReplayStats st =
      record_and_replay(root, [&] { write_by_hand((root / "ckpt").string(), "complete checkpoint", true, false); });
  EXPECT_TRUE(any_contains(st.failures, "lost: " + (root / "ckpt").string())) << st.failures.size();
}

TEST(CrashDisk, FindsANewFolderWhoseParentIsNotSynced) {
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const fs::path root = tmp / "disk";
  const crash::ReplayStats st = record_and_replay(root, [&] {
    ASSERT_EQ(nl::file_ops().mkdir((root / "checkpoints").string()), 0);  // std::filesystem's way: no sync
    nl::write_file_atomic((root / "checkpoints/ckpt-1").string(), "step 1");
  });
  EXPECT_TRUE(any_contains(st.failures, "lost: " + (root / "checkpoints/ckpt-1").string())) << st.failures.size();
}

TEST(CrashDisk, AWriteInPlaceIsTornWhereAtomicIsNot) {
  const crash::ScratchDir scratch;
  const fs::path tmp(scratch.path);
  const fs::path root = tmp / "disk";
  const crash::ReplayStats st = record_and_replay(root, [&] {
    nl::write_file_atomic((root / "run.json").string(), std::string(100, 'a'));
    // Rewritten in place, synced, promised: the window between truncate and sync is a hole.
    nl::FileOps& ops = nl::file_ops();
    const int fd = ops.create((root / "run.json").string());
    const std::string b(100, 'b');
    ASSERT_EQ(ops.write(fd, b.data(), b.size()), 100);
    ASSERT_EQ(ops.fsync(fd), 0);
    ASSERT_EQ(ops.close(fd), 0);
    ops.promised((root / "run.json").string());
  });
  // The first version was promised: between the truncating open and the fsync a power cut
  // leaves it neither version.
  EXPECT_TRUE(any_contains(st.failures, "torn: " + (root / "run.json").string())) << st.failures.size();
}

}  // namespace
