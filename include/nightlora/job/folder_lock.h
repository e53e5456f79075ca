// One writer per folder: an exclusive flock(2) on DIR/.lock, held as long as the object
// lives. The kernel releases it when the process dies, however it dies, so a killed run never
// leaves a stale lock behind and the next run needs no cleanup. The holder writes its PID into
// the file so a refused process can say who holds it.
#pragma once
#include <string>

#include "nightlora/util/error.h"

namespace nl {

// Thrown when another process holds the lock: the CLI maps it to exit_code::kBusy.
class FolderBusy : public Error {
 public:
  explicit FolderBusy(const std::string& msg) : Error(msg) {}
};

class FolderLock {
 public:
  // Locks DIR/.lock (DIR must exist). wait_s: how long to wait for a holder to let go (0: not
  // at all, < 0: forever). `what` names the folder's user in messages ("training run",
  // "nightly job"). inherit: the lock stays held by child processes too (a job whose child
  // must finish before another job may start); otherwise the descriptor is close-on-exec.
  // Throws FolderBusy naming the holder's PID when the wait ends with the lock still held,
  // nl::Error when the lock file cannot be opened.
  FolderLock(const std::string& dir, const std::string& what, double wait_s = 0, bool inherit = false);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace nl
