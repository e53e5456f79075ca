// A file layer (job/file_ops.h) that fails one chosen call: with EIO, ENOSPC, or, for a
// write, by writing only part of what was asked (a short write, as a disk that just filled
// up gives). Calls are numbered from 0 in the order the program makes them; syncs are not
// done for real (the disk's durability is crash_disk.h's business, not this one's).
#pragma once
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "nightlora/job/file_ops.h"

namespace faults {

enum class Fault { None, Eio, Enospc, ShortWrite };

inline const char* fault_name(Fault f) {
  switch (f) {
    case Fault::None: return "none";
    case Fault::Eio: return "EIO";
    case Fault::Enospc: return "ENOSPC";
    case Fault::ShortWrite: return "short write";
  }
  return "?";
}

class FaultyFileOps : public nl::FileOps {
 public:
  FaultyFileOps(Fault fault, int64_t at) : fault_(fault), at_(at) {}
  int64_t calls() const { return n_; }       // calls made so far
  bool injected() const { return injected_; }  // the fault happened
  std::string what;                          // the call that failed, when injected

  int create(const std::string& p) override { return hit("create " + p) ? -1 : FileOps::create(p); }
  int open_append(const std::string& p) override { return hit("open_append " + p) ? -1 : FileOps::open_append(p); }
  ssize_t write(int fd, const void* d, size_t n) override {
    if (fault_ == Fault::ShortWrite) {
      if (next("write", n > 1)) return FileOps::write(fd, d, n / 2);  // half, and no error: the caller retries
      return FileOps::write(fd, d, n);
    }
    return hit("write") ? -1 : FileOps::write(fd, d, n);
  }
  int fsync(int fd) override { return hit("fsync") ? -1 : 0; }
  int close(int fd) override {
    if (hit("close")) {
      FileOps::close(fd);  // Linux closes the descriptor even when close reports an error
      errno = error();
      return -1;
    }
    return FileOps::close(fd);
  }
  int rename(const std::string& a, const std::string& b) override { return hit("rename " + b) ? -1 : FileOps::rename(a, b); }
  int sync_dir(const std::string& d) override { return hit("sync_dir " + d) ? -1 : 0; }
  int unlink(const std::string& p) override { return hit("unlink " + p) ? -1 : FileOps::unlink(p); }
  int rmdir(const std::string& p) override { return hit("rmdir " + p) ? -1 : FileOps::rmdir(p); }
  int mkdir(const std::string& p) override { return hit("mkdir " + p) ? -1 : FileOps::mkdir(p); }
  int symlink(const std::string& t, const std::string& l) override { return hit("symlink " + l) ? -1 : FileOps::symlink(t, l); }
  int link(const std::string& a, const std::string& b) override { return hit("link " + b) ? -1 : FileOps::link(a, b); }

 private:
  int error() const { return fault_ == Fault::Enospc ? ENOSPC : EIO; }
  // Counts the call; true when it is the chosen one and the fault applies to it.
  bool next(const std::string& call, bool applies) {
    const bool mine = n_++ == at_ && applies;
    if (mine) {
      injected_ = true;
      what = call;
    }
    return mine;
  }
  // As next(), and sets errno for an error fault.
  bool hit(const std::string& call) {
    if (!next(call, fault_ == Fault::Eio || fault_ == Fault::Enospc)) return false;
    errno = error();
    return true;
  }

  Fault fault_;
  int64_t at_;
  int64_t n_ = 0;
  bool injected_ = false;
};

}  // namespace faults
