#include "nightlora/job/file_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "nightlora/util/error.h"

namespace nl {

namespace fs = std::filesystem;

int FileOps::create(const std::string& path) { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); }

int FileOps::open_append(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

ssize_t FileOps::write(int fd, const void* data, size_t n) { return ::write(fd, data, n); }
int FileOps::fsync(int fd) { return ::fsync(fd); }
int FileOps::close(int fd) { return ::close(fd); }
int FileOps::rename(const std::string& from, const std::string& to) { return ::rename(from.c_str(), to.c_str()); }

int FileOps::sync_dir(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == EINVAL || errno == ENOTSUP ? 0 : -1;
  int rc = ::fsync(fd);
  if (rc != 0 && (errno == EINVAL || errno == ENOTSUP)) rc = 0;  // cannot sync folders: nothing more to do
  const int err = errno;
  ::close(fd);
  errno = err;
  return rc;
}

int FileOps::unlink(const std::string& path) { return ::unlink(path.c_str()); }
int FileOps::rmdir(const std::string& path) { return ::rmdir(path.c_str()); }
int FileOps::mkdir(const std::string& path) { return ::mkdir(path.c_str(), 0755); }
int FileOps::symlink(const std::string& target, const std::string& link) { return ::symlink(target.c_str(), link.c_str()); }
int FileOps::link(const std::string& existing, const std::string& new_path) {
  return ::link(existing.c_str(), new_path.c_str());
}

namespace {
FileOps posix_ops;
FileOps* current_ops = &posix_ops;

}  // namespace

FileOps& file_ops() { return *current_ops; }

std::string parent_folder(const std::string& path) {
  const std::string p = fs::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

ScopedFileOps::ScopedFileOps(FileOps& ops) : previous_(current_ops) { current_ops = &ops; }
ScopedFileOps::~ScopedFileOps() { current_ops = previous_; }

void sync_dir_or_throw(const std::string& dir) {
  if (file_ops().sync_dir(dir) != 0)
    fail(dir, std::string("cannot flush the folder to disk: ") + std::strerror(errno),
         "check the disk (dmesg); the files written there may not survive a power cut");
}

void make_dirs(const std::string& dir) {
  // The missing folders, outermost first.
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (p.filename().empty()) continue;  // "a/b/" normalizes to a trailing empty name
    if (fs::is_directory(p, ec)) break;
    missing.push_back(p);
    if (!p.has_parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    const std::string p = it->string();
    if (file_ops().mkdir(p) != 0 && errno != EEXIST) {
      const int err = errno;
      fail(p, std::string("cannot create the folder: ") + std::strerror(err),
           err == ENOSPC ? "the disk is full: free some space and run again" : "choose a writable output folder");
    }
    sync_dir_or_throw(parent_folder(p));
  }
  if (!fs::is_directory(dir, ec)) fail(dir, "exists but is not a folder", "remove it or choose another output folder");
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return;
  if (fs::is_directory(st)) {
    std::vector<std::string> children;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) children.push_back(it->path().string());
    for (const std::string& c : children) remove_tree(c);
    file_ops().rmdir(path);
  } else {
    file_ops().unlink(path);
  }
}

void write_all_or_throw(int fd, const std::string& path, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  size_t off = 0;
  while (off < n) {
    const ssize_t w = file_ops().write(fd, p + off, n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      fail(path, "write failed after " + std::to_string(off) + " of " + std::to_string(n) + " bytes: " + std::strerror(err),
           err == ENOSPC || err == EDQUOT ? "the disk is full: free some space and run again"
                                          : "check the disk (dmesg) and run again");
    }
    if (w == 0) fail(path, "write made no progress after " + std::to_string(off) + " of " + std::to_string(n) + " bytes");
    off += static_cast<size_t>(w);  // a short write (e.g. the disk just filled) is retried; the retry says why
  }
}

AppendFile::AppendFile(const std::string& path, bool truncate) : path_(path) {
  fd_ = truncate ? file_ops().create(path) : file_ops().open_append(path);
  if (fd_ < 0) fail(path, std::string("cannot open for writing: ") + std::strerror(errno), "choose a writable output folder");
}

AppendFile::~AppendFile() {
  try {
    flush();
  } catch (const Error&) {
    // Already reported by the flush that failed, or the job is unwinding from another error.
  }
  if (fd_ >= 0) file_ops().close(fd_);
}

AppendFile& AppendFile::operator<<(std::string_view s) {
  pending_.append(s);
  return *this;
}

void AppendFile::flush() {
  if (pending_.empty()) return;
  std::string out;
  out.swap(pending_);  // a failed write is not retried by the next flush: the log goes on after the error
  write_all_or_throw(fd_, path_, out.data(), out.size());
}

}  // namespace nl
