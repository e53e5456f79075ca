// Atomic, checksummed files: what checkpoints are made of. A write that fails (a full disk
// above all) must leave the previous file intact, and damage must be detected on reading.
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nltest::TempDir;

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

bool no_temp_files(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return false;
  return true;
}

TEST(AtomicFile, Crc32MatchesTheStandardCheckValue) {
  EXPECT_EQ(nl::crc32("123456789"), 0xCBF43926u);
  EXPECT_EQ(nl::crc32(""), 0u);
  // Fed in pieces, the running checksum is the same.
  std::string s = pattern(1000, 1);
  EXPECT_EQ(nl::crc32(std::string_view(s).substr(300), nl::crc32(std::string_view(s).substr(0, 300))), nl::crc32(s));
}

TEST(AtomicFile, WriteReplacesTheFileAndLeavesNoTemporary) {
  TempDir t;
  std::string p = (t / "state.bin").string();
  nl::write_file_atomic(p, "first");
  EXPECT_EQ(nl::read_file(p), "first");
  nl::write_file_atomic(p, "second, longer");
  EXPECT_EQ(nl::read_file(p), "second, longer");
  nl::write_file_atomic(p, "");
  EXPECT_EQ(nl::read_file(p), "");
  EXPECT_TRUE(no_temp_files(t.path));
}

TEST(AtomicFile, CheckedRoundTrip) {
  TempDir t;
  std::string p = (t / "ck.bin").string();
  std::string payload = pattern(5000, 7);
  nl::write_file_checked(p, payload);
  EXPECT_EQ(fs::file_size(p), payload.size() + nl::kChecksumFooterSize);
  nl::CheckedRead r = nl::read_file_checked(p);
  ASSERT_TRUE(r.ok) << r.problem;
  EXPECT_EQ(r.payload, payload);
  EXPECT_EQ(nl::read_file_checked_or_throw(p), payload);
  // An empty payload is a valid file too.
  nl::write_file_checked(p, "");
  EXPECT_TRUE(nl::read_file_checked(p).ok);
}

TEST(AtomicFile, EveryTruncationIsDetected) {
  TempDir t;
  std::string p = (t / "ck.bin").string();
  std::string payload = pattern(100, 3);
  nl::write_file_checked(p, payload);
  std::string whole = nl::read_file(p);
  for (size_t len = 0; len < whole.size(); ++len) {
    nltest::write_text(p, whole.substr(0, len));
    nl::CheckedRead r = nl::read_file_checked(p);
    EXPECT_FALSE(r.ok) << "truncated to " << len << " bytes was accepted";
    EXPECT_FALSE(r.problem.empty());
  }
}

TEST(AtomicFile, ABitFlipInAnyByteIsDetected) {
  TempDir t;
  std::string p = (t / "ck.bin").string();
  std::string payload = pattern(64, 5);
  nl::write_file_checked(p, payload);
  std::string whole = nl::read_file(p);
  // One bit in every byte (payload and footer), cycling through the bit positions.
  for (size_t i = 0; i < whole.size(); ++i) {
    int bit = static_cast<int>(i % 8);
    std::string bad = whole;
    bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
    nltest::write_text(p, bad);
    EXPECT_FALSE(nl::read_file_checked(p).ok) << "flip of bit " << bit << " of byte " << i << " was accepted";
  }
}

TEST(AtomicFile, DamageAndAbsenceAreDescribed) {
  TempDir t;
  std::string p = (t / "ck.bin").string();
  EXPECT_EQ(nl::read_file_checked(p).problem, "missing");
  nl::write_file_checked(p, pattern(100, 9));
  std::string whole = nl::read_file(p);
  whole[10] ^= 1;
  nltest::write_text(p, whole);
  nl::CheckedRead r = nl::read_file_checked(p);
  EXPECT_NE(r.problem.find("checksum mismatch"), std::string::npos) << r.problem;
  try {
    nl::read_file_checked_or_throw(p);
    FAIL() << "damaged file accepted";
  } catch (const nl::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(p), std::string::npos) << m;
    EXPECT_NE(m.find("checksum mismatch"), std::string::npos) << m;
  }
  // A plain file that never had a footer.
  nltest::write_text(p, std::string(100, 'x'));
  EXPECT_NE(nl::read_file_checked(p).problem.find("no checksum footer"), std::string::npos);
}

TEST(AtomicFile, MissingFolderIsAClearError) {
  TempDir t;
  std::string p = (t / "no" / "such" / "dir" / "f.bin").string();
  try {
    nl::write_file_atomic(p, "x");
    FAIL() << "no error";
  } catch (const nl::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  }
}

// A real full disk: a 64 KiB tmpfs (needs root, i.e. CAP_SYS_ADMIN; skipped otherwise).
struct SmallTmpfs {
  fs::path dir;
  bool mounted = false;
  explicit SmallTmpfs(const fs::path& d) : dir(d) {
    fs::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") == 0;
  }
  ~SmallTmpfs() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

TEST(AtomicFile, FullDiskKeepsThePreviousFile) {
  TempDir t;
  SmallTmpfs fsmall(t / "small");
  if (!fsmall.mounted) GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): the ulimit test below covers write failures";
  std::string p = (fsmall.dir / "checkpoint.bin").string();
  std::string good = pattern(20000, 11);
  nl::write_file_checked(p, good);
  // The new file needs 200 KB on a 64 KiB file system that already holds 20 KB.
  std::string big = pattern(200000, 12);
  try {
    nl::write_file_checked(p, big);
    FAIL() << "a write larger than the file system succeeded";
  } catch (const nl::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("No space left"), std::string::npos) << m;
    EXPECT_NE(m.find("disk is full"), std::string::npos) << m;
    EXPECT_NE(m.find("previous file is intact"), std::string::npos) << m;
  }
  nl::CheckedRead r = nl::read_file_checked(p);
  ASSERT_TRUE(r.ok) << r.problem;
  EXPECT_EQ(r.payload, good);
  EXPECT_TRUE(no_temp_files(fsmall.dir)) << "the partial temporary file was left behind, using the space";
  // Once space is there again, writing works.
  std::string next = pattern(30000, 13);
  nl::write_file_checked(p, next);
  EXPECT_EQ(nl::read_file_checked_or_throw(p), next);
}

// Any write error, without root: the file size limit (ulimit -f) makes write() fail with
// EFBIG part-way through, in a child process so the limit does not touch the test runner.
TEST(AtomicFile, WriteErrorPartWayKeepsThePreviousFile) {
  TempDir t;
  std::string p = (t / "checkpoint.bin").string();
  std::string good = pattern(10000, 21);
  nl::write_file_checked(p, good);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // get EFBIG from write() instead of being killed
    rlimit lim{50000, 50000};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(10);
    try {
      nl::write_file_checked(p, pattern(200000, 22));
      ::_exit(11);  // should have failed
    } catch (const nl::Error& e) {
      std::string m = e.what();
      if (m.find("ulimit") == std::string::npos || m.find("previous file is intact") == std::string::npos) ::_exit(12);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setrlimit failed, 11: no error, 12: message lacks the hint";
  nl::CheckedRead r = nl::read_file_checked(p);
  ASSERT_TRUE(r.ok) << r.problem;
  EXPECT_EQ(r.payload, good);
  EXPECT_TRUE(no_temp_files(t.path));
}

}  // namespace
