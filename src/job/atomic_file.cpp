#include "nightlora/job/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

namespace fs = std::filesystem;

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

// What the user can do about a failed write, by errno: the common cases get a concrete hint.
std::string hint_for(int err) {
  switch (err) {
    case ENOSPC:
      return "the disk is full: free some space and run again; the previous file is intact";
    case EDQUOT:
      return "the disk quota is exhausted: free some space and run again; the previous file is intact";
    case EFBIG:
      return "the file is larger than this process may write (ulimit -f): raise the limit; the previous file is intact";
    case EROFS:
      return "the file system is read-only: choose a writable output folder";
    case EACCES:
    case EPERM:
      return "no permission to write there: choose a writable output folder";
    case ENOENT:
    case ENOTDIR:
      return "the folder does not exist: create it or choose another";
    default:
      return "the previous file is intact";
  }
}

[[noreturn]] void fail_errno(const std::string& where, const std::string& what, int err) {
  fail(where, what + ": " + std::strerror(err), hint_for(err));
}

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

constexpr char kFooterMagic[8] = {'N', 'L', 'C', 'K', 'S', 'U', 'M', '1'};

std::string make_footer(uint64_t payload_size, uint32_t payload_crc) {
  std::string f(kFooterMagic, sizeof(kFooterMagic));
  put_u64(f, payload_size);
  put_u32(f, payload_crc);
  put_u32(f, crc32(f));  // guards the footer itself: a flipped length bit is not "truncated"
  return f;
}

// Closes the descriptor on scope exit unless released; removes the temp file unless committed.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) file_ops().close(fd);
    if (!committed) file_ops().unlink(path);
  }
};

void write_all(TempFile& t, const char* data, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t w = file_ops().write(t.fd, data + off, n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_errno(t.path, "write failed after " + std::to_string(off) + " of " + std::to_string(n) + " bytes", errno);
    }
    if (w == 0) fail(t.path, "write made no progress after " + std::to_string(off) + " of " + std::to_string(n) + " bytes");
    off += static_cast<size_t>(w);  // a short write (e.g. the disk just filled) is retried; the retry reports why
  }
}

// The order is what makes the file survive a power cut: the data is fsync'd before the rename
// (else the new name may come back holding nothing), and the folder after it (else the old
// name may come back). Only then is the file promised to the caller. `write_data` writes the
// contents through write_all.
void write_atomic(const std::string& path, const std::function<void(TempFile&)>& write_data) {
  fs::path target(path);
  TempFile t;
  t.path = path + ".tmp";
  t.fd = file_ops().create(t.path);
  if (t.fd < 0) {
    int err = errno;
    t.committed = true;  // nothing was created, nothing to remove
    fail_errno(t.path, "cannot create temporary file", err);
  }
  write_data(t);
  // Delayed allocation (ext4, btrfs, NFS) may only report a full disk here.
  if (file_ops().fsync(t.fd) != 0) fail_errno(t.path, "cannot flush to disk", errno);
  int fd = t.fd;
  t.fd = -1;
  if (file_ops().close(fd) != 0) fail_errno(t.path, "cannot close", errno);
  if (file_ops().rename(t.path, path) != 0) fail_errno(path, "cannot rename the temporary file into place", errno);
  t.committed = true;
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  if (file_ops().sync_dir(dir) != 0)
    fail(dir, "the new " + target.filename().string() + " is in place, but the folder cannot be flushed to disk: " +
                  std::strerror(errno),
         "check the disk (dmesg); a power cut may bring back the previous file");
  file_ops().promised(path);
}

}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = make_crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_atomic(path, [&](TempFile& t) { write_all(t, bytes.data(), bytes.size()); });
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno(path, "cannot open", errno);
  std::string out;
  // Its size up front: a string grown by appending holds up to twice the file while it grows
  // (a checkpoint is the adapter and its two AdamW moments).
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      fail(path, std::string("read failed: ") + std::strerror(err));
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

void write_file_checked(const std::string& path, std::string_view payload) {
  write_file_checked_streamed(path, [&](const PieceEmitter& emit) { emit(payload); });
}

void write_file_checked_streamed(const std::string& path, const std::function<void(const PieceEmitter& emit)>& produce) {
  write_atomic(path, [&](TempFile& t) {
    uint64_t size = 0;
    uint32_t crc = 0;
    produce([&](std::string_view piece) {
      write_all(t, piece.data(), piece.size());
      size += piece.size();
      crc = crc32(piece, crc);
    });
    const std::string footer = make_footer(size, crc);
    write_all(t, footer.data(), footer.size());
  });
}

CheckedRead read_file_checked(const std::string& path) {
  CheckedRead r;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    r.problem = "missing";
    return r;
  }
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const Error& e) {
    r.problem = e.what();
    return r;
  }
  if (bytes.size() < kChecksumFooterSize) {
    r.problem = "truncated: " + std::to_string(bytes.size()) + " bytes, too short to hold the checksum footer";
    return r;
  }
  const char* f = bytes.data() + bytes.size() - kChecksumFooterSize;
  if (std::memcmp(f, kFooterMagic, sizeof(kFooterMagic)) != 0) {
    r.problem = "truncated or not a checked file: no checksum footer at its end (" + std::to_string(bytes.size()) + " bytes)";
    return r;
  }
  if (crc32(f, 20) != static_cast<uint32_t>(get_le(f + 20, 4))) {
    r.problem = "checksum footer is damaged";
    return r;
  }
  uint64_t len = get_le(f + 8, 8);
  size_t have = bytes.size() - kChecksumFooterSize;
  if (len != have) {
    r.problem = "length mismatch: footer says " + std::to_string(len) + " payload bytes, file holds " + std::to_string(have);
    return r;
  }
  uint32_t want = static_cast<uint32_t>(get_le(f + 16, 4));
  uint32_t got = crc32(bytes.data(), have);
  if (want != got) {
    char msg[96];
    std::snprintf(msg, sizeof(msg), "checksum mismatch: CRC-32 is %08x, footer says %08x", got, want);
    r.problem = msg;
    return r;
  }
  bytes.resize(have);
  r.ok = true;
  r.payload = std::move(bytes);
  return r;
}

std::string read_file_checked_or_throw(const std::string& path) {
  CheckedRead r = read_file_checked(path);
  if (!r.ok) fail(path, "damaged file: " + r.problem, "the file was cut short or altered after it was written; use an older copy");
  return std::move(r.payload);
}

}  // namespace nl
