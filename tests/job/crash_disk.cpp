#include "crash_disk.h"

#include <unistd.h>

#include <cerrno>
#include <random>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace crash {

namespace fs = std::filesystem;

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::Create: return "create";
    case OpKind::OpenAppend: return "open_append";
    case OpKind::Write: return "write";
    case OpKind::Fsync: return "fsync";
    case OpKind::Close: return "close";
    case OpKind::Rename: return "rename";
    case OpKind::SyncDir: return "sync_dir";
    case OpKind::Unlink: return "unlink";
    case OpKind::Rmdir: return "rmdir";
    case OpKind::Mkdir: return "mkdir";
    case OpKind::Symlink: return "symlink";
    case OpKind::Link: return "link";
    case OpKind::Promised: return "promised";
  }
  return "?";
}

const char* crash_name(CrashKind k) {
  switch (k) {
    case CrashKind::Durable: return "durable only";
    case CrashKind::NamesKept: return "names kept, unsynced data lost";
    case CrashKind::Torn: return "names kept, unsynced data torn";
  }
  return "?";
}

uint64_t hash_bytes(const std::string& s) { return std::hash<std::string>{}(s) ^ (s.size() * 0x9E3779B97F4A7C15ull); }

namespace {
std::string absolute_of(const std::string& p) { return fs::absolute(fs::path(p)).lexically_normal().string(); }
bool under(const std::string& abs, const std::string& root) {
  return abs == root || (abs.size() > root.size() && abs.compare(0, root.size(), root) == 0 && abs[root.size()] == '/');
}
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

ScratchDir::ScratchDir() {
  std::error_code ec;
  const fs::path base = fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0 ? fs::path("/dev/shm")
                                                                                            : fs::temp_directory_path();
  std::random_device rd;
  for (;;) {
    const fs::path p = base / ("nltest-crash-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    if (fs::create_directory(p, ec)) {
      path = p.string();
      return;
    }
    if (ec) throw std::runtime_error("cannot create a scratch folder in " + base.string() + ": " + ec.message());
  }
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

// ---- the recorder -------------------------------------------------------------------------

void RecordingFileOps::add(Op op) {
  std::lock_guard<std::mutex> lk(mu_);
  const std::string root = absolute_of(root_);
  for (std::string* p : {&op.path, &op.path2}) {
    if (p->empty()) continue;
    *p = absolute_of(*p);
    if (!under(*p, root)) {
      outside.push_back(std::string(op_name(op.kind)) + " " + *p);
      return;
    }
  }
  ops.push_back(std::move(op));
}

int RecordingFileOps::create(const std::string& path) {
  const int fd = FileOps::create(path);
  if (fd >= 0) add({OpKind::Create, path, "", fd, ""});
  return fd;
}
int RecordingFileOps::open_append(const std::string& path) {
  const int fd = FileOps::open_append(path);
  if (fd >= 0) add({OpKind::OpenAppend, path, "", fd, ""});
  return fd;
}
ssize_t RecordingFileOps::write(int fd, const void* data, size_t n) {
  const ssize_t w = FileOps::write(fd, data, n);
  if (w > 0) add({OpKind::Write, "", "", fd, std::string(static_cast<const char*>(data), static_cast<size_t>(w))});
  return w;
}
// Syncs are recorded, not done: the model is the disk that matters here, and real syncs
// would make the test wait on the machine's disk.
int RecordingFileOps::fsync(int fd) {
  add({OpKind::Fsync, "", "", fd, ""});
  return 0;
}
int RecordingFileOps::close(int fd) {
  add({OpKind::Close, "", "", fd, ""});  // before: once closed, the number may be reused
  return FileOps::close(fd);
}
int RecordingFileOps::rename(const std::string& from, const std::string& to) {
  const int rc = FileOps::rename(from, to);
  if (rc == 0) add({OpKind::Rename, from, to, -1, ""});
  return rc;
}
int RecordingFileOps::sync_dir(const std::string& dir) {
  add({OpKind::SyncDir, dir, "", -1, ""});
  return 0;
}
int RecordingFileOps::unlink(const std::string& path) {
  const int rc = FileOps::unlink(path);
  if (rc == 0) add({OpKind::Unlink, path, "", -1, ""});
  return rc;
}
int RecordingFileOps::rmdir(const std::string& path) {
  const int rc = FileOps::rmdir(path);
  if (rc == 0) add({OpKind::Rmdir, path, "", -1, ""});
  return rc;
}
int RecordingFileOps::mkdir(const std::string& path) {
  const int rc = FileOps::mkdir(path);
  if (rc == 0) add({OpKind::Mkdir, path, "", -1, ""});
  return rc;
}
int RecordingFileOps::symlink(const std::string& target, const std::string& link) {
  const int rc = FileOps::symlink(target, link);
  if (rc == 0) add({OpKind::Symlink, link, "", -1, target});
  return rc;
}
int RecordingFileOps::link(const std::string& existing, const std::string& new_path) {
  const int rc = FileOps::link(existing, new_path);
  if (rc == 0) add({OpKind::Link, existing, new_path, -1, ""});
  return rc;
}
void RecordingFileOps::promised(const std::string& path) { add({OpKind::Promised, path, "", -1, ""}); }

RecordingWithOutsideWrites::RecordingWithOutsideWrites(std::string root, std::function<bool(const std::string&)> durable)
    : RecordingFileOps(root), tracker_(root), durable_(std::move(durable)) {}

void RecordingWithOutsideWrites::catch_up() {
  track(0);
  for (Op& op : tracker_.absorb_outside_changes(durable_)) {
    outside_call_.resize(ops.size() + 1, false);
    outside_call_[ops.size()] = true;
    ops.push_back(std::move(op));
    ++absorbed;
  }
  applied_ = ops.size();
}

// ---- the model ----------------------------------------------------------------------------

DiskModel::DiskModel(std::string root) : root_(absolute_of(root)) {
  const int r = new_node(true);
  snapshot(root_, r);
}

int DiskModel::new_node(bool dir) {
  nodes_.emplace_back();
  nodes_.back().dir = dir;
  return static_cast<int>(nodes_.size()) - 1;
}

void DiskModel::snapshot(const std::string& abs, int node) {
  for (const auto& e : fs::directory_iterator(abs)) {
    const std::string name = e.path().filename().string();
    int n;
    if (e.is_symlink()) {
      n = new_node(false);
      nodes_[n].symlink = true;
      nodes_[n].data = nodes_[n].synced = fs::read_symlink(e.path()).string();
    } else if (e.is_directory()) {
      n = new_node(true);
      snapshot(e.path().string(), n);
    } else {
      n = new_node(false);
      nodes_[n].data = nodes_[n].synced = slurp(e.path());
      versions_[(fs::path(abs) / name).string()].insert(hash_bytes(nodes_[n].data));
    }
    nodes_[node].entries[name] = nodes_[node].synced_entries[name] = n;
  }
}

std::string DiskModel::rel(const std::string& abs) const { return abs.size() > root_.size() ? abs.substr(root_.size() + 1) : ""; }

int DiskModel::resolve(const std::string& relpath) const {
  int n = 0;
  std::stringstream ss(relpath);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    if (!nodes_[n].dir) return -1;
    const auto it = nodes_[n].entries.find(part);
    if (it == nodes_[n].entries.end()) return -1;
    n = it->second;
  }
  return n;
}

int DiskModel::parent(const std::string& relpath, std::string& name) const {
  const fs::path p(relpath);
  name = p.filename().string();
  const int d = resolve(p.parent_path().string());
  return d >= 0 && nodes_[d].dir ? d : -1;
}


void DiskModel::new_version(const std::string& abs, const std::string& bytes) {
  const uint64_t h = hash_bytes(bytes);
  versions_[abs].insert(h);
  for (Promise& p : promised_)
    if (p.path == abs) p.allowed.insert(h);
}

void DiskModel::apply(const Op& op) {
  std::string name;
  const std::string r = rel(op.path);
  switch (op.kind) {
    case OpKind::Create:
    case OpKind::OpenAppend: {
      const int d = parent(r, name);
      if (d < 0) throw std::runtime_error("model: no folder for " + op.path);
      auto it = nodes_[d].entries.find(name);
      int n;
      if (it != nodes_[d].entries.end()) {
        n = it->second;
        if (op.kind == OpKind::Create) nodes_[n].data.clear();  // O_TRUNC
      } else {
        n = new_node(false);
        nodes_[d].entries[name] = n;
      }
      fd_node_[op.fd] = n;
      versions_.erase(op.path);  // written in place from now on: no longer one of the atomic names
      break;
    }
    case OpKind::Write: nodes_.at(fd_node_.at(op.fd)).data += op.data; break;
    case OpKind::Fsync: {
      Node& n = nodes_.at(fd_node_.at(op.fd));
      n.synced = n.data;
      break;
    }
    case OpKind::Close: fd_node_.erase(op.fd); break;
    case OpKind::Rename: {
      std::string to_name;
      const int d = parent(r, name), d2 = parent(rel(op.path2), to_name);
      if (d < 0 || d2 < 0 || !nodes_[d].entries.count(name)) throw std::runtime_error("model: bad rename of " + op.path);
      const int n = nodes_[d].entries[name];
      nodes_[d].entries.erase(name);
      nodes_[d2].entries[to_name] = n;
      if (!nodes_[n].dir && !nodes_[n].symlink) new_version(op.path2, nodes_[n].data);
      break;
    }
    case OpKind::SyncDir: {
      const int d = resolve(r);
      if (d < 0 || !nodes_[d].dir) throw std::runtime_error("model: sync of a missing folder " + op.path);
      nodes_[d].synced_entries = nodes_[d].entries;
      break;
    }
    case OpKind::Unlink:
    case OpKind::Rmdir: {
      const int d = parent(r, name);
      if (d >= 0) nodes_[d].entries.erase(name);
      break;
    }
    case OpKind::Mkdir: {
      const int d = parent(r, name);
      if (d < 0) throw std::runtime_error("model: no folder for " + op.path);
      nodes_[d].entries[name] = new_node(true);
      break;
    }
    case OpKind::Symlink: {
      const int d = parent(r, name);
      if (d < 0) throw std::runtime_error("model: no folder for " + op.path);
      const int n = new_node(false);
      nodes_[n].symlink = true;
      nodes_[n].data = nodes_[n].synced = op.data;  // a link's target is written with its inode
      nodes_[d].entries[name] = n;
      break;
    }
    case OpKind::Link: {
      std::string to_name;
      const int n = resolve(r), d2 = parent(rel(op.path2), to_name);
      if (n < 0 || d2 < 0) throw std::runtime_error("model: bad link of " + op.path);
      nodes_[d2].entries[to_name] = n;
      new_version(op.path2, nodes_[n].data);
      break;
    }
    case OpKind::Promised: {
      const int n = resolve(r);
      if (n < 0) throw std::runtime_error("model: promised a missing file " + op.path);
      promised_.push_back({op.path, {hash_bytes(nodes_[n].data)}, false});
      break;
    }
  }
  track_promises();
}

// After each call: a promised name the program itself removed (old checkpoints, a replaced
// best adapter) may be gone after a crash. Rewriting it in place is not allowed: only a
// complete new version renamed or linked over it (see apply) is.
void DiskModel::track_promises() {
  for (Promise& p : promised_)
    if (resolve(rel(p.path)) < 0) p.may_be_gone = true;
}

void DiskModel::write_tree(int node, const std::string& abs, CrashKind kind) const {
  const Node& d = nodes_[node];
  for (const auto& [name, n] : kind == CrashKind::Durable ? d.synced_entries : d.entries) {
    const fs::path p = fs::path(abs) / name;
    const Node& c = nodes_[n];
    if (c.dir) {
      fs::create_directory(p);
      write_tree(n, p.string(), kind);
    } else if (c.symlink) {
      fs::create_symlink(c.data, p);
    } else {
      std::string bytes = c.synced;
      if (kind == CrashKind::Torn && c.data != c.synced) {
        // The unsynced part: its first half reached the disk, the rest is zeros.
        size_t same = 0;
        while (same < c.synced.size() && same < c.data.size() && c.synced[same] == c.data[same]) ++same;
        bytes = c.data.substr(0, same + (c.data.size() - same) / 2);
        bytes.resize(c.data.size(), '\0');
      }
      std::ofstream f(p, std::ios::binary);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  }
}

std::vector<Op> DiskModel::absorb_outside_changes(const std::function<bool(const std::string&)>& durable) {
  std::vector<Op> out;
  absorb(0, root_, durable, out);
  return out;
}

void DiskModel::absorb(int node, const std::string& abs, const std::function<bool(const std::string&)>& durable,
                       std::vector<Op>& out) {
  auto emit = [&](Op op) {
    apply(op);
    out.push_back(std::move(op));
  };
  std::map<std::string, fs::directory_entry> on_disk;  // sorted: the same changes, the same calls
  for (const auto& e : fs::directory_iterator(abs)) on_disk[e.path().filename().string()] = e;
  bool names_changed = false;
  // Gone, or no longer of the same kind: removed.
  const std::map<std::string, int> seen = nodes_[node].entries;
  for (const auto& [name, n] : seen) {
    const auto it = on_disk.find(name);
    const Node& c = nodes_[n];
    const bool same_kind = it != on_disk.end() && (it->second.is_symlink() ? c.symlink
                                                   : it->second.is_directory() ? c.dir
                                                                               : !c.dir && !c.symlink);
    if (same_kind && !(c.symlink && fs::read_symlink(it->second.path()).string() != c.data)) continue;
    emit({c.dir ? OpKind::Rmdir : OpKind::Unlink, abs + "/" + name, "", -1, ""});
    names_changed = true;
  }
  for (const auto& [name, e] : on_disk) {
    const std::string path = abs + "/" + name;
    const auto it = nodes_[node].entries.find(name);
    if (e.is_symlink()) {
      if (it == nodes_[node].entries.end()) {
        emit({OpKind::Symlink, path, "", -1, fs::read_symlink(e.path()).string()});
        names_changed = true;
      }
    } else if (e.is_directory()) {
      if (it == nodes_[node].entries.end()) {
        emit({OpKind::Mkdir, path, "", -1, ""});
        names_changed = true;
      }
      absorb(nodes_[node].entries.at(name), path, durable, out);
    } else {
      const std::string bytes = slurp(e.path());
      if (it != nodes_[node].entries.end() && nodes_[it->second].data == bytes) continue;
      names_changed |= it == nodes_[node].entries.end();
      const int fd = next_outside_fd_++;
      emit({OpKind::Create, path, "", fd, ""});
      if (!bytes.empty()) emit({OpKind::Write, "", "", fd, bytes});
      if (durable(path)) emit({OpKind::Fsync, "", "", fd, ""});
      emit({OpKind::Close, "", "", fd, ""});
    }
  }
  if (names_changed) emit({OpKind::SyncDir, abs, "", -1, ""});
}

void DiskModel::materialize(CrashKind kind) const {
  for (const auto& e : fs::directory_iterator(root_)) fs::remove_all(e.path());
  write_tree(0, root_, kind);
}

uint64_t DiskModel::fingerprint(CrashKind kind) const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  std::function<void(int)> walk = [&](int node) {
    for (const auto& [name, n] : kind == CrashKind::Durable ? nodes_[node].synced_entries : nodes_[node].entries) {
      const Node& c = nodes_[n];
      mix(hash_bytes(name));
      mix(c.dir ? 1 : c.symlink ? 2 : 3);
      if (c.dir) {
        walk(n);
        mix(4);
      } else {
        mix(hash_bytes(c.synced));
        if (kind == CrashKind::Torn) mix(hash_bytes(c.data));
      }
    }
  };
  walk(0);
  // The same disk with more promised of it is checked again.
  for (const Promise& p : promised_) {
    mix(hash_bytes(p.path));
    mix(p.allowed.size() * 2 + (p.may_be_gone ? 1 : 0));
  }
  return h;
}

ReplayStats replay_every_prefix(DiskModel model, const std::vector<Op>& ops,
                                const std::function<std::vector<std::string>()>& resume_and_check,
                                const PointFilter& replay_point) {
  ReplayStats st;
  std::map<uint64_t, std::vector<std::string>> seen;  // a disk already resumed: same program, same outcome
  const CrashKind kinds[] = {CrashKind::Durable, CrashKind::NamesKept, CrashKind::Torn};
  for (size_t k = 0; k <= ops.size(); ++k) {
    if (k > 0) model.apply(ops[k - 1]);
    if (replay_point && !replay_point(k)) continue;
    ++st.points;
    for (CrashKind kind : kinds) {
      ++st.disks;
      const uint64_t fp = model.fingerprint(kind) ^ static_cast<uint64_t>(kind);
      std::vector<std::string> bad;
      const auto it = seen.find(fp);
      if (it != seen.end()) {
        bad = it->second;
      } else {
        ++st.distinct;
        model.materialize(kind);
        bad = model.check_materialized();
        if (bad.empty()) bad = resume_and_check();
        seen[fp] = bad;
      }
      for (const std::string& b : bad)
        if (st.failures.size() < 30)
          st.failures.push_back("power cut after " + std::to_string(k) + " of " + std::to_string(ops.size()) + " calls" +
                                (k > 0 ? std::string(" (last: ") + op_name(ops[k - 1].kind) + " " +
                                             (ops[k - 1].path.empty() ? "fd " + std::to_string(ops[k - 1].fd) : ops[k - 1].path) + ")"
                                       : "") +
                                ", " + crash_name(kind) + ": " + b);
    }
  }
  st.promises = model.promises();
  return st;
}

std::vector<std::string> DiskModel::check_materialized() const {
  std::vector<std::string> bad;
  auto content = [](const fs::path& p, bool& present) -> std::string {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(p, ec);
    present = !ec && fs::exists(st);
    if (!present) return "";
    if (fs::is_symlink(st)) return fs::read_symlink(p).string();
    return slurp(p);
  };
  for (const Promise& p : promised_) {
    bool present = false;
    const std::string bytes = content(p.path, present);
    if (!present) {
      if (!p.may_be_gone) bad.push_back("lost: " + p.path + " was promised and is gone");
    } else if (!p.allowed.count(hash_bytes(bytes))) {
      bad.push_back("torn: " + p.path + " was promised and holds " + std::to_string(bytes.size()) +
                    " bytes that were never a complete version of it");
    }
  }
  // Every file under a name written atomically holds one of its complete versions.
  for (auto it = fs::recursive_directory_iterator(root_); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file() || it->is_symlink()) continue;
    const std::string abs = it->path().string();
    const auto v = versions_.find(abs);
    if (v == versions_.end()) continue;  // a temporary file, or one written in place (a log)
    if (!v->second.count(hash_bytes(slurp(it->path()))))
      bad.push_back("torn: " + abs + " (" + std::to_string(it->file_size()) + " bytes) is not a complete version of it");
  }
  return bad;
}

}  // namespace crash
