// Power-loss testing of the file layer (job/file_ops.h), as SQLite tests its VFS.
//
// RecordingFileOps passes every call on to POSIX and records the ones that succeeded. A
// DiskModel then replays a prefix of the record on an in-memory model of a disk that keeps
// two versions of everything: what the program sees (the page cache) and what is durable
// (file data as of its last fsync, folder entries as of the folder's last fsync). A power
// cut after the prefix leaves a disk somewhere between the two; the model builds three of
// them, the ways real file systems are seen to fail:
//   Durable:    only what was synced: unsynced names vanish (or come back), files hold
//               their last fsync'd data (a new file never synced is empty).
//   NamesKept:  every rename/create/unlink reached the disk (a journaled file system
//               commits them), but file data only as of its last fsync.
//   Torn:       names kept, and each file's unsynced bytes half written, half zeros (the
//               data blocks of a delayed allocation that did not all make it).
// Materialize() writes such a disk as real files under the root, so the real program can
// be run on it; Check() says what the program had promised (FileOps::promised) and lost, and
// which files under a final name (not *.tmp) hold bytes that never were a complete version.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "nightlora/job/file_ops.h"

namespace crash {

enum class OpKind { Create, OpenAppend, Write, Fsync, Close, Rename, SyncDir, Unlink, Rmdir, Mkdir, Symlink, Link, Promised };
const char* op_name(OpKind k);

struct Op {
  OpKind kind;
  std::string path, path2;  // path2: rename's and link's destination
  int fd = -1;
  std::string data;  // the bytes a write wrote; a symlink's target
};

// Records every successful call (and each promise) under `root`; calls outside it are
// counted in `outside` (a test asserts there are none: its files all live under root).
// fsync and sync_dir are recorded but not done (the model is the disk that matters).
class RecordingFileOps : public nl::FileOps {
 public:
  explicit RecordingFileOps(std::string root) : root_(std::move(root)) {}
  int create(const std::string& path) override;
  int open_append(const std::string& path) override;
  ssize_t write(int fd, const void* data, size_t n) override;
  int fsync(int fd) override;
  int close(int fd) override;
  int rename(const std::string& from, const std::string& to) override;
  int sync_dir(const std::string& dir) override;
  int unlink(const std::string& path) override;
  int rmdir(const std::string& path) override;
  int mkdir(const std::string& path) override;
  int symlink(const std::string& target, const std::string& link) override;
  int link(const std::string& existing, const std::string& new_path) override;
  void promised(const std::string& path) override;

  std::vector<Op> ops;
  std::vector<std::string> outside;

 private:
  void add(Op op);
  std::string root_;
  std::mutex mu_;
};

// A fresh folder for a crash test, removed at the end: in memory (/dev/shm) where there is
// one, since a replay writes and removes thousands of files; else in the temp folder.
struct ScratchDir {
  ScratchDir();
  ~ScratchDir();
  std::string path;
  std::string operator/(const std::string& s) const { return path + "/" + s; }
};

// POSIX without the syncs: for the runs on a materialized disk, which need no durability.
class NoSyncFileOps : public nl::FileOps {
 public:
  int fsync(int) override { return 0; }
  int sync_dir(const std::string&) override { return 0; }
};

enum class CrashKind { Durable, NamesKept, Torn };
const char* crash_name(CrashKind k);

// The disk under `root` as the recorded calls change it. Construct it before the recorded
// run: it snapshots what is under root then (all of it durable).
class DiskModel {
 public:
  explicit DiskModel(std::string root);
  // Applies one recorded call to the model (both the seen and the durable versions).
  void apply(const Op& op);
  // Writes the disk a power cut now would leave, replacing everything under root.
  void materialize(CrashKind kind) const;
  // What is wrong with the disk now under root (as materialize left it, before anything ran
  // on it): promised files lost or not as promised, files under a final name holding bytes
  // that were never a complete version of them. Empty when all is well.
  std::vector<std::string> check_materialized() const;
  int64_t promises() const { return static_cast<int64_t>(promised_.size()); }
  // Identifies the disk materialize(kind) would write (equal disks, equal fingerprints).
  uint64_t fingerprint(CrashKind kind) const;
  // What changed under root without going through the file layer (a child process's files,
  // the child's output log): the calls that bring the model in line with the real disk, each
  // new or changed file written whole (and fsync'd unless durable(path) says it is a log
  // the writer never syncs), each removed name unlinked, and each folder where a name came
  // or went synced. Applied to this model and returned (for the record).
  std::vector<Op> absorb_outside_changes(const std::function<bool(const std::string& path)>& durable);

 private:
  struct Node {
    bool dir = false, symlink = false;
    std::string data, synced;                             // files: seen, durable
    std::map<std::string, int> entries, synced_entries;  // folders: seen, durable
  };
  int new_node(bool dir);
  int resolve(const std::string& rel) const;  // node of a path (relative to root) as seen, or -1
  // The folder node holding `rel` and the last name, or -1 when the folder is not there.
  int parent(const std::string& rel, std::string& name) const;
  std::string rel(const std::string& abs) const;
  void new_version(const std::string& abs, const std::string& bytes);  // renamed or linked to abs
  void track_promises();
  void snapshot(const std::string& abs, int node);
  void write_tree(int node, const std::string& abs, CrashKind kind) const;
  void absorb(int node, const std::string& abs, const std::function<bool(const std::string&)>& durable,
              std::vector<Op>& out);
  int next_outside_fd_ = 1 << 24;  // descriptors of the absorbed writes: never a real one

  std::string root_;
  std::vector<Node> nodes_;
  std::map<int, int> fd_node_;
  // Complete versions each final name has held (hash of the bytes): what a reader may find.
  std::map<std::string, std::set<uint64_t>> versions_;
  struct Promise {
    std::string path;
    std::set<uint64_t> allowed;  // the promised bytes, and every version renamed or linked there since
    bool may_be_gone = false;    // the program itself removed or replaced it since
  };
  std::vector<Promise> promised_;
};

uint64_t hash_bytes(const std::string& s);

struct ReplayStats {
  int64_t points = 0;    // crash points replayed: every prefix of the record (the empty one included)
                         // or those a PointFilter picked
  int64_t disks = 0;     // crashed disks checked: points x the three CrashKinds
  int64_t distinct = 0;  // of those, different disks (each materialized and resumed once)
  int64_t promises = 0;  // promised files in the whole record
  std::vector<std::string> failures;  // the first 30
};

// Which crash points to replay: called with k (the prefix length, 0..ops.size()) before the
// disks of that point are built; false skips the point (its call is still applied to the
// model). Also lets a check know where in the record the cut is (what was reported by then).
using PointFilter = std::function<bool(size_t k)>;

// A RecordingFileOps that also records what a child process (or code that bypasses the
// file layer) changed under root: before each call, the changes found since the last one
// enter the record as calls (DiskModel::absorb_outside_changes). So the writes of a child
// that ran between two of the program's calls appear as made, durable, at its exit (what the
// child itself does at each of its own calls is its own replay's business: `train`'s is
// PowerLoss.Train). Single-threaded use only.
class RecordingWithOutsideWrites : public RecordingFileOps {
 public:
  RecordingWithOutsideWrites(std::string root, std::function<bool(const std::string&)> durable);
  int create(const std::string& path) override { return catch_up(), track(RecordingFileOps::create(path)); }
  int open_append(const std::string& path) override { return catch_up(), track(RecordingFileOps::open_append(path)); }
  ssize_t write(int fd, const void* data, size_t n) override { return catch_up(), track(RecordingFileOps::write(fd, data, n)); }
  int fsync(int fd) override { return catch_up(), track(RecordingFileOps::fsync(fd)); }
  int close(int fd) override { return catch_up(), track(RecordingFileOps::close(fd)); }
  int rename(const std::string& a, const std::string& b) override { return catch_up(), track(RecordingFileOps::rename(a, b)); }
  int sync_dir(const std::string& d) override { return catch_up(), track(RecordingFileOps::sync_dir(d)); }
  int unlink(const std::string& p) override { return catch_up(), track(RecordingFileOps::unlink(p)); }
  int rmdir(const std::string& p) override { return catch_up(), track(RecordingFileOps::rmdir(p)); }
  int mkdir(const std::string& p) override { return catch_up(), track(RecordingFileOps::mkdir(p)); }
  int symlink(const std::string& t, const std::string& l) override { return catch_up(), track(RecordingFileOps::symlink(t, l)); }
  int link(const std::string& a, const std::string& b) override { return catch_up(), track(RecordingFileOps::link(a, b)); }
  void promised(const std::string& path) override {
    catch_up();
    RecordingFileOps::promised(path);
    track(0);
  }
  // Takes in what changed since the last call (also call it once the program is done).
  void catch_up();
  // Whether call i stands for an outside change. A block of them is one event (the child's
  // exit): a crash point inside a block is not one the real disk could be at.
  bool from_outside(size_t i) const { return i < outside_call_.size() && outside_call_[i]; }
  int64_t absorbed = 0;  // calls that stand for outside changes

 private:
  template <typename T>
  T track(T result) {  // applies the calls just recorded to the tracking model
    for (; applied_ < ops.size(); ++applied_) tracker_.apply(ops[applied_]);
    return result;
  }
  std::vector<bool> outside_call_;
  DiskModel tracker_;  // the program's view of the disk as recorded so far
  size_t applied_ = 0;
  std::function<bool(const std::string&)> durable_;
};

// For every prefix of `ops` (or those `replay_point` picks) and every CrashKind: materializes
// the disk a power cut there leaves (`model` as it was before the recorded run), checks it
// (check_materialized), then calls resume_and_check, which runs the program on it and says
// what went wrong.
ReplayStats replay_every_prefix(DiskModel model, const std::vector<Op>& ops,
                                const std::function<std::vector<std::string>()>& resume_and_check,
                                const PointFilter& replay_point = {});

}  // namespace crash
