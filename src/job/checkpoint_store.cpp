#include "nightlora/job/checkpoint_store.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {
namespace fs = std::filesystem;
constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".nlck";

// The step in a checkpoint's file name, or -1 when the name is not one of ours.
int64_t step_of(const std::string& name) {
  size_t pl = std::char_traits<char>::length(kPrefix), sl = std::char_traits<char>::length(kSuffix);
  if (name.size() <= pl + sl || name.rfind(kPrefix, 0) != 0 || name.compare(name.size() - sl, sl, kSuffix) != 0) return -1;
  std::string digits = name.substr(pl, name.size() - pl - sl);
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) return -1;
  return std::strtoll(digits.c_str(), nullptr, 10);
}
}  // namespace

std::string CheckpointStore::file_name(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s%012lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return buf;
}

CheckpointStore::CheckpointStore(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  if (keep_ < 1) fail("--keep-checkpoints", "must be at least 1");
  make_dirs(dir_);  // durable: a checkpoint promised inside must not vanish with its folder
  std::error_code ec;
  // A write killed half-way leaves "<name>.tmp"; the checkpoint itself was never replaced.
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0 && step_of(n.substr(0, n.size() - 4)) >= 0)
      file_ops().unlink(it->path().string());
  }
}

std::vector<CheckpointEntry> CheckpointStore::list() const {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t s = step_of(it->path().filename().string());
    if (s >= 0) out.push_back({s, it->path().string()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

std::string CheckpointStore::save(int64_t step, std::string_view payload) {
  return save(step, [&](const PieceEmitter& emit) { emit(payload); });
}

std::string CheckpointStore::save(int64_t step, const std::function<void(const PieceEmitter& emit)>& produce) {
  if (step < 0) fail("checkpoint", "step must not be negative");
  std::string path = (fs::path(dir_) / file_name(step)).string();
  write_file_checked_streamed(path, produce);
  auto all = list();
  // Unsynced removals: one lost to a power cut only brings back an older checkpoint.
  if (static_cast<int>(all.size()) > keep_)
    for (size_t i = 0; i + keep_ < all.size(); ++i) file_ops().unlink(all[i].path);
  return path;
}

std::optional<LoadedCheckpoint> CheckpointStore::load_latest() const {
  auto all = list();
  if (all.empty()) return std::nullopt;
  LoadedCheckpoint out;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    CheckedRead r = read_file_checked(it->path);
    if (!r.ok) {
      out.skipped.push_back(it->path + ": " + r.problem);
      continue;
    }
    out.step = it->step;
    out.path = it->path;
    out.payload = std::move(r.payload);
    return out;
  }
  std::string list_of;
  for (const auto& s : out.skipped) list_of += "\n  " + s;
  fail(dir_, "all " + std::to_string(all.size()) + " checkpoints are damaged:" + list_of,
       "restore one from a backup, or move them away to start the run over");
}

}  // namespace nl
