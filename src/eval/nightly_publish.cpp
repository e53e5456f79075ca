// OUT/current: the published adapter, replaced atomically.
//
// A folder cannot be renamed over a non-empty folder, so OUT/current is a symbolic link to a
// complete adapter folder (OUT/adapters/NNNN). Publishing writes the new folder completely
// first, then renames a fresh link over the old one: rename(2) is atomic, so a reader (or a
// job killed at any instant) sees either the old adapter or the new one, never a mix. For a
// power cut the order of syncs matters too (all through nl::file_ops(), so a crash test can
// replay it): the new folder's parents, then its files, then the link's folder.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <algorithm>
#include <vector>

#include "nightlora/eval/nightly.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"

namespace nl {

namespace fs = std::filesystem;

std::string nightly_current_adapter(const std::string& out) {
  const fs::path link = fs::path(out) / "current";
  std::error_code ec;
  if (!fs::is_symlink(link, ec)) {
    if (fs::exists(link, ec))
      fail(link.string(), "is not the symbolic link a nightly job makes", "remove it, or use another --out");
    return "";
  }
  const fs::path target = fs::read_symlink(link, ec);
  if (ec) fail(link.string(), "cannot read the link: " + ec.message());
  const fs::path dir = target.is_absolute() ? target : fs::path(out) / target;
  if (!fs::is_directory(dir, ec))
    fail(link.string(), "points to " + dir.string() + ", which is not a folder",
         "remove the link to start again from the base model");
  return dir.string();
}

namespace {
// The candidate's file at `to`: a hard link (publishing never copies), or a copy where links
// are not possible (another file system). Either way the data is on disk before `to` exists.
void link_or_copy(const fs::path& from, const fs::path& to) {
  file_ops().unlink(to.string());  // left by a job killed while publishing
  if (file_ops().link(from.string(), to.string()) == 0) return;
  // Only a file system that cannot link these two (another device, no hard links) is a
  // reason to copy; a disk error or a full disk is reported.
  if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP)
    fail(to.string(), std::string("cannot link the candidate's file here: ") + std::strerror(errno),
         errno == ENOSPC ? "the disk is full: free some space and run again; OUT/current is unchanged"
                         : "check the disk (dmesg) and run again; OUT/current is unchanged");
  const std::string bytes = read_file(from.string());
  const int fd = file_ops().create(to.string());
  if (fd < 0) fail(to.string(), std::string("cannot create: ") + std::strerror(errno), "check that OUT is writable");
  try {
    write_all_or_throw(fd, to.string(), bytes.data(), bytes.size());
    if (file_ops().fsync(fd) != 0) fail(to.string(), std::string("cannot flush to disk: ") + std::strerror(errno));
  } catch (...) {
    file_ops().close(fd);
    throw;
  }
  if (file_ops().close(fd) != 0) fail(to.string(), std::string("cannot close: ") + std::strerror(errno));
}
}  // namespace

void nightly_point_current(const std::string& out, const std::string& adapter_dir) {
  // The link is relative (adapters/NNNN), so OUT can be moved or copied as a whole.
  const fs::path rel = fs::relative(fs::path(adapter_dir), fs::path(out));
  if (rel.empty() || rel.native().rfind("..", 0) == 0)
    fail(adapter_dir, "the published adapter must be inside " + out);
  sync_dir_or_throw(adapter_dir);  // the adapter's files are there before anything points at them
  const fs::path tmp = fs::path(out) / ".current.tmp";
  const fs::path link = fs::path(out) / "current";
  file_ops().unlink(tmp.string());  // left by a job killed between these two calls
  if (file_ops().symlink(rel.string(), tmp.string()) != 0)
    fail(tmp.string(), std::string("cannot create the link: ") + std::strerror(errno));
  if (file_ops().rename(tmp.string(), link.string()) != 0) {
    const int err = errno;
    file_ops().unlink(tmp.string());
    fail(link.string(), std::string("cannot replace the link: ") + std::strerror(err));
  }
  sync_dir_or_throw(out);  // the switch itself survives a power cut
  file_ops().promised(link.string());
}

std::string nightly_publish(const std::string& out, const std::string& name, const std::string& candidate_dir) {
  const fs::path dest = fs::path(out) / "adapters" / name;
  make_dirs(dest.string());  // durable: OUT/adapters and the new folder are there before the link
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(candidate_dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) link_or_copy(f, dest / f.filename());
  nightly_point_current(out, dest.string());
  return dest.string();
}

}  // namespace nl
