// The nightly job's run folders (OUT/runs/NNNN) and its storage: which run continues, which is
// abandoned and why, failures counted, and what a sealed run no longer needs on disk.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nl {

// OUT/runs/NNNN folders, oldest first.
std::vector<std::filesystem::path> nightly_runs(const std::filesystem::path& out);
// A run with decision.json (decided) or abandoned.json (given up) is sealed: never continued.
bool run_sealed(const std::filesystem::path& run);

// Failures of a run so far (failures.json), and one more with its message.
int run_failures(const std::filesystem::path& run);
void record_run_failure(const std::filesystem::path& run, const std::string& error);

// Gives a run up: abandoned.json {reason}, its checkpoints deleted.
void abandon_run(const std::filesystem::path& run, const std::string& reason);

// What differs between two settings objects ("lr 0.01 -> 0.001, iters 20 -> 40"), "" when
// nothing does.
std::string settings_change(const nlohmann::json& before, const nlohmann::json& now);

// Deletes a run's checkpoints and `train`'s own copy of the adapter (once the candidate is
// taken, or the run is given up, they are not needed).
void free_run_training(const std::filesystem::path& run);

// Frees what sealed runs no longer need: for every sealed run, its checkpoints and train's own
// copy of the adapter; for sealed runs older than the newest run, also the candidate and the
// data files; and published adapters (OUT/adapters/NNNN) beyond the `keep_adapters` newest,
// never the one OUT/current names. Folders the job did not name (adapters/mine) are left alone.
void prune_job(const std::filesystem::path& out, int keep_adapters);

struct StorageUse {
  uint64_t total = 0, adapters = 0, checkpoints = 0, other = 0;  // bytes, hard links counted once
  int64_t n_published = 0;  // folders in OUT/adapters
};
StorageUse measure_storage(const std::filesystem::path& out);
std::string storage_line(const StorageUse& s);  // "12.3 MiB: adapters 4.0 MiB (3 published), ..."
nlohmann::json storage_json(const StorageUse& s);

}  // namespace nl
