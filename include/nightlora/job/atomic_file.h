// Files that are either fully written or not there at all: checkpoints, run state, reports.
//
// A crash, a SIGKILL or a full disk in the middle of writing must never leave a half-written
// file where a good one used to be. So a file is written to a temporary name in the same
// folder, fsync'd, renamed over the old one (rename is atomic within a file system) and the
// folder is fsync'd so the rename itself survives a power cut. Every one of these calls goes
// through nl::file_ops() (file_ops.h), so the power-loss tests can replay them.
//
// A "checked" file additionally ends in a small footer with the payload's length and CRC-32,
// so a reader can tell a complete file from a truncated or bit-flipped one (a disk, a copy
// tool or a user can still damage a file after it was written).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace nl {

// CRC-32 (IEEE 802.3, the one zlib and PNG use): crc32("123456789") == 0xCBF43926.
// `crc` continues a running checksum, so large data can be fed in pieces.
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t crc32(std::string_view s, uint32_t crc = 0) { return crc32(s.data(), s.size(), crc); }

// Writes `bytes` to `path` atomically (temp file in the same folder, fsync, rename, fsync of
// the folder). On any failure (no space, quota, I/O error, read-only folder) the temporary
// file is removed, whatever was at `path` before is untouched, and nl::Error says what
// happened and what to do. (One exception: when only the final folder sync fails, the new
// file is already in place, and the error says so.) The folder must exist.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Reads a whole file. Throws nl::Error when it cannot be opened or read.
std::string read_file(const std::string& path);

// The footer that write_file_checked appends: magic "NLCKSUM1", payload length (u64 LE),
// CRC-32 of the payload (u32 LE), CRC-32 of the 20 bytes before it (u32 LE).
constexpr size_t kChecksumFooterSize = 24;

// write_file_atomic of `payload` followed by the checksum footer.
void write_file_checked(const std::string& path, std::string_view payload);

// The same file, for a payload made piece by piece and never held whole (a checkpoint):
// `produce` hands each piece to `emit`, in order; each is written as it comes, its length and
// CRC-32 counted, and the footer follows. A failure, or an exception from `produce`, removes
// the temporary file and leaves whatever was at `path` untouched, as write_file_checked does.
using PieceEmitter = std::function<void(std::string_view piece)>;
void write_file_checked_streamed(const std::string& path, const std::function<void(const PieceEmitter& emit)>& produce);

// Outcome of verifying a checked file, so callers can fall back to an older file instead of
// stopping (e.g. the previous checkpoint).
struct CheckedRead {
  bool ok = false;
  std::string payload;  // when ok
  std::string problem;  // when not ok: "missing", "truncated ...", "checksum mismatch ..."
};

// Reads and verifies a file written by write_file_checked. Never throws for a damaged or
// missing file: the problem is described in the result.
CheckedRead read_file_checked(const std::string& path);

// As read_file_checked, but throws nl::Error (naming the file and the damage) when not ok.
std::string read_file_checked_or_throw(const std::string& path);

}  // namespace nl
