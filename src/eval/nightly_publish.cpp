// OUT/current: the published adapter, replaced atomically.
//
// A folder cannot be renamed over a non-empty folder, so OUT/current is a symbolic link to a
// complete adapter folder (OUT/adapters/NNNN). Publishing writes the new folder completely
// first, then renames a fresh link over the old one: rename(2) is atomic, so a reader (or a
// job killed at any instant) sees either the old adapter or the new one, never a mix.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "nightlora/eval/nightly.h"
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
void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(dir, std::string("cannot open the folder to sync it: ") + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail(dir, std::string("fsync failed: ") + std::strerror(err));
}
}  // namespace

void nightly_point_current(const std::string& out, const std::string& adapter_dir) {
  // The link is relative (adapters/NNNN), so OUT can be moved or copied as a whole.
  const fs::path rel = fs::relative(fs::path(adapter_dir), fs::path(out));
  if (rel.empty() || rel.native().rfind("..", 0) == 0)
    fail(adapter_dir, "the published adapter must be inside " + out);
  fsync_dir(adapter_dir);
  const fs::path tmp = fs::path(out) / ".current.tmp";
  const fs::path link = fs::path(out) / "current";
  ::unlink(tmp.c_str());  // left by a job killed between these two calls
  if (::symlink(rel.c_str(), tmp.c_str()) != 0)
    fail(tmp.string(), std::string("cannot create the link: ") + std::strerror(errno));
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(link.string(), std::string("cannot replace the link: ") + std::strerror(err));
  }
  fsync_dir(out);
}

}  // namespace nl
