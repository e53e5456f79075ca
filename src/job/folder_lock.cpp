#include "nightlora/job/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "nightlora/util/error.h"

namespace nl {

namespace {
// The PID the holder wrote, or "" when the file holds none (an old lock file, or a holder
// that has not written it yet).
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.find_first_not_of("0123456789") == std::string::npos ? s : std::string();
}
}  // namespace

FolderLock::FolderLock(const std::string& dir, const std::string& what, double wait_s, bool inherit)
    : path_((std::filesystem::path(dir) / ".lock").string()) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | (inherit ? 0 : O_CLOEXEC), 0644);
  if (fd_ < 0) fail(path_, "cannot open the lock file", "check that the folder is writable");
  using clock = std::chrono::steady_clock;
  const auto until = clock::now() + std::chrono::duration<double>(wait_s < 0 ? 0 : wait_s);
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (wait_s >= 0 && clock::now() >= until) {
      const std::string pid = holder_pid(fd_);
      ::close(fd_);
      fd_ = -1;
      throw FolderBusy(path_ + ": another " + what + " is using " + dir +
                       (pid.empty() ? std::string() : " (process " + pid + ")") +
                       " (wait for it to finish or stop it; the lock is released when that process ends, however "
                       "it ends)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The PID is only for messages: a lock without it still excludes.
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace nl
