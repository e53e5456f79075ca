// The one door through which nightlora changes the files that must survive a crash: every
// create, write, fsync, rename, folder sync, unlink, mkdir and link of checkpoints, adapters,
// run records, the nightly job's publish and state files goes through nl::file_ops().
//
// Why one door: durability depends on the ORDER of these calls (data fsync'd before the
// rename, the folder fsync'd after it, a new folder's parent fsync'd before anything inside
// it is promised). A test replaces the door (ScopedFileOps) with one that records every call
// and then rebuilds the disk a power cut would leave after each prefix of them, or with one
// that fails a chosen call with EIO, ENOSPC or a short write. The default is plain POSIX.
//
// Conventions are POSIX's: a call returns -1 (or a short count) and sets errno on failure,
// so the writers keep their own error messages. Reads do not go through here: a crash test
// materializes the crashed disk as real files, and the program reads them as usual.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace nl {

class FileOps {
 public:
  virtual ~FileOps() = default;
  // open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644): a descriptor, or -1.
  virtual int create(const std::string& path);
  // open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644): a descriptor, or -1.
  virtual int open_append(const std::string& path);
  virtual ssize_t write(int fd, const void* data, size_t n);
  virtual int fsync(int fd);
  virtual int close(int fd);
  virtual int rename(const std::string& from, const std::string& to);
  // fsync of a folder: makes the names created, renamed or removed in it durable. A file
  // system that cannot sync folders (EINVAL, ENOTSUP on open or fsync) counts as done.
  virtual int sync_dir(const std::string& dir);
  virtual int unlink(const std::string& path);
  virtual int rmdir(const std::string& path);
  virtual int mkdir(const std::string& path);  // mode 0755
  virtual int symlink(const std::string& target, const std::string& link);
  virtual int link(const std::string& existing, const std::string& new_path);  // a hard link
  // Not a file operation: the writer of `path` has made it complete and durable and returns
  // to its caller, which may now rely on it (a crash test checks that it then survives).
  virtual void promised(const std::string& path) {}
};

// The file layer in use: POSIX unless a ScopedFileOps replaced it.
FileOps& file_ops();

// Replaces the file layer while it lives (tests). Not thread-safe against writers running
// meanwhile: install it before the code under test starts.
class ScopedFileOps {
 public:
  explicit ScopedFileOps(FileOps& ops);
  ~ScopedFileOps();
  ScopedFileOps(const ScopedFileOps&) = delete;
  ScopedFileOps& operator=(const ScopedFileOps&) = delete;

 private:
  FileOps* previous_;
};

// Helpers on top of file_ops() that throw nl::Error (what, where, what to do).

// Creates `dir` and its missing parents, each new folder made durable (its parent synced)
// before the next: a file promised inside must not vanish with a folder a power cut forgot.
void make_dirs(const std::string& dir);

// The folder that holds `path` ("." for a bare file name): the one to sync after a rename.
std::string parent_folder(const std::string& path);

// Syncs folder `dir`; throws when the system reports an I/O error.
void sync_dir_or_throw(const std::string& dir);

// Removes `path` (a file, a link or a whole folder) when present; errors are ignored (what
// is removed is never needed again, and a removal lost to a crash is harmless).
void remove_tree(const std::string& path);

// Writes all of `data` (retrying short writes and EINTR); throws nl::Error naming `path`.
void write_all_or_throw(int fd, const std::string& path, const void* data, size_t n);

// A log that grows by appending (log.jsonl). Lines are written as they come; flush() pushes
// them to the file. Logs are not promised durable: a power cut may cut their tail (readers
// drop an incomplete last line). Writes that fail are reported by flush().
class AppendFile {
 public:
  // Opens `path` for appending (truncate: start it empty). Throws nl::Error when it cannot.
  AppendFile(const std::string& path, bool truncate);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  AppendFile& operator<<(std::string_view s);
  AppendFile& operator<<(char c) { return *this << std::string_view(&c, 1); }
  void flush();

 private:
  std::string path_;
  std::string pending_;
  int fd_ = -1;
};

}  // namespace nl
