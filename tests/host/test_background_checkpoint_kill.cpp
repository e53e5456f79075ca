// A checkpoint write killed half-way through `nightlora train` leaves the previous checkpoint
// usable: the test watches the checkpoint folder (inotify) and sends SIGKILL the moment the
// trainer creates a checkpoint's temporary file, i.e. while it writes and fsyncs it. The next
// session resumes from the checkpoint before, and the run ends byte-identical to one that was
// never interrupted.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>

#include <optional>

#include "../report/tiny_run.h"
#include "resume_util.h"

namespace {

namespace fs = std::filesystem;
using namespace tinyrun;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The step in a checkpoint's name, "ckpt-000000000012.nlck" (or its ".tmp").
int64_t step_of(const std::string& name) {
  const size_t d = name.find_first_of("0123456789");
  return d == std::string::npos ? -1 : std::stoll(name.substr(d));
}

// Checkpoints (complete ones) and leftover temporaries in DIR.
struct Listing {
  std::vector<std::string> done, tmp;
};
Listing list(const fs::path& dir) {
  Listing l;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (ends_with(n, ".nlck")) l.done.push_back(n);
    if (ends_with(n, ".tmp")) l.tmp.push_back(n);
  }
  std::sort(l.done.begin(), l.done.end());
  return l;
}

// Blocks until a "*.tmp" file is created in the watched folder; false on timeout.
bool wait_for_temp_file(int fd, int timeout_ms) {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    const ssize_t n = read(fd, buf, sizeof buf);
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->len > 0 && ends_with(ev->name, ".tmp")) return true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

TEST(CheckpointWriteKill, KilledMidWriteKeepsThePreviousCheckpointAndResumeIsExact) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  const int iters = 12;
  const std::string opts = "--save-every 1 --save-every-sec 0 --keep 2";
  // Rank 32 instead of the shared arguments' 4: checkpoints big enough that writing and
  // fsyncing one takes a while.
  auto args = [&](const fs::path& o) {
    std::string s = tiny_train_args(model, o, iters, opts);
    const size_t at = s.find(" --rank 4 ");
    if (at != std::string::npos) s.replace(at, 10, " --rank 32 ");
    return s;
  };
  auto ref = nltest::run_cli(args(td / "ref"));
  ASSERT_EQ(ref.rc, 0) << ref.out << ref.err;

  const fs::path out = td / "killed", ckdir = out / "checkpoints";
  fs::create_directories(ckdir);
  int mid_write = 0, sessions = 0;
  // After a mid-write kill: the checkpoint the next session must resume from ("" for none).
  std::optional<std::string> expect_resume;
  for (; sessions < 30 && mid_write < 3; ++sessions) {
    const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_GE(inotify_add_watch(fd, ckdir.c_str(), IN_CREATE), 0);
    const fs::path log = td / ("session" + std::to_string(sessions) + ".txt");
    pid_t pid = spawn_cli(args(out), log);
    ASSERT_GT(pid, 0);
    const bool writing = wait_for_temp_file(fd, 60000);
    kill(pid, SIGKILL);
    wait_exit(pid);
    close(fd);
    const std::string text = nltest::read_text(log);
    EXPECT_EQ(text.find("rror"), std::string::npos) << text;
    if (expect_resume) {
      if (expect_resume->empty()) EXPECT_EQ(text.find("resuming from"), std::string::npos) << text;
      else
        EXPECT_NE(text.find("resuming from " + (ckdir / *expect_resume).string()), std::string::npos)
            << "expected to resume from " << *expect_resume << ":\n" << text;
      expect_resume.reset();
    }
    ASSERT_TRUE(writing) << "no checkpoint write seen:\n" << text;
    const Listing after = list(ckdir);
    if (!after.tmp.empty()) {
      // Killed while writing: the temporary is there, and every complete checkpoint is older
      // than the one being written (none was replaced by a partial one).
      ++mid_write;
      const int64_t writing_step = step_of(after.tmp.back());
      for (const std::string& done : after.done) EXPECT_LT(step_of(done), writing_step) << done;
      expect_resume = after.done.empty() ? "" : after.done.back();
    }
    if (fs::exists(out / "adapter.gguf")) break;  // finished before enough kills landed
  }
  std::printf("%d sessions, %d killed in the middle of a checkpoint write\n", sessions, mid_write);
  EXPECT_GE(mid_write, 1) << "no kill landed inside a checkpoint write: the test did not exercise it";

  auto fin = nltest::run_cli(args(out));
  ASSERT_EQ(fin.rc, 0) << fin.out << fin.err;
  EXPECT_EQ(fin.err.find("damaged"), std::string::npos) << fin.err;
  EXPECT_TRUE(list(ckdir).tmp.empty()) << "leftover temporaries were not cleaned up";
  for (const char* f : {"adapter_model.safetensors", "adapter.gguf"})
    EXPECT_TRUE(nltest::read_text(td / "ref" / f) == nltest::read_text(out / f)) << f << " differs";
  const Listing r = list(td / "ref/checkpoints"), k = list(ckdir);
  ASSERT_FALSE(r.done.empty());
  ASSERT_FALSE(k.done.empty());
  EXPECT_EQ(r.done.back(), k.done.back());
  const std::string a = resume_test::state_bytes(td / "ref/checkpoints" / r.done.back()),
                    b = resume_test::state_bytes(ckdir / k.done.back());
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "final adapter + optimizer state differs";
}

}  // namespace
